package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/testaddr"
)

// group is a replicated partition of three in-process replicas, each with
// its own directory and ports, for tests.
type group struct {
	t     *testing.T
	snap  uint64        // RaftSnapshotEntries; 0 = default
	audit string        // AuditLog of each replica, with its number appended; "" = none
	locks time.Duration // LockTimeout; 0 = default
	trash []int         // TrashDays of each replica; nil = 0
	peers []Peer
	dirs  []string
	srvs  []*Server
}

func newGroup(t *testing.T, n int) *group { return newGroupSnap(t, n, 0) }

// newGroupSnap is newGroup with a snapshot every snap entries, keeping
// snap/4 entries before it.
func newGroupSnap(t *testing.T, n int, snap uint64) *group {
	return newGroupOf(&group{t: t, srvs: make([]*Server, n), snap: snap})
}

// newGroupOf starts the replicas of g, whose t, srvs and settings are
// set.
func newGroupOf(g *group) *group {
	t, n := g.t, len(g.srvs)
	root := t.TempDir()
	for i := range n {
		g.peers = append(g.peers, Peer{ID: uint64(i + 1), Addr: testaddr.Free(t), RaftAddr: testaddr.Free(t)})
		g.dirs = append(g.dirs, filepath.Join(root, fmt.Sprintf("r%d", i+1)))
	}
	for i := range n {
		g.start(i)
	}
	t.Cleanup(func() {
		for _, s := range g.srvs {
			if s != nil {
				s.Close()
			}
		}
	})
	return g
}

// start opens and serves replica i on its fixed addresses.
func (g *group) start(i int) {
	g.t.Helper()
	cfg := Config{Dir: g.dirs[i], Peers: g.peers, ReplicaID: g.peers[i].ID, RaftTick: 10 * time.Millisecond,
		RaftSnapshotEntries: g.snap, RaftCatchUpEntries: g.snap / 4, LockTimeout: g.locks, Logger: slog.New(slog.DiscardHandler)}
	if g.trash != nil {
		cfg.TrashDays = g.trash[i]
	}
	if g.audit != "" {
		cfg.AuditLog = fmt.Sprintf("%s.%d", g.audit, i+1)
	}
	s, err := Open(cfg)
	if err != nil {
		g.t.Fatalf("open replica %d: %v", i+1, err)
	}
	var ln net.Listener
	for range 50 { // the port may still be in TIME_WAIT after a stop
		if ln, err = net.Listen("tcp", g.peers[i].Addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.Close()
		g.t.Fatal(err)
	}
	go s.Serve(ln)
	g.srvs[i] = s
}

// stop stops replica i at once.
func (g *group) stop(i int) {
	g.srvs[i].Close()
	g.srvs[i] = nil
}

// leader waits for a replica that knows itself leader and returns its
// index.
func (g *group) leader() int {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, s := range g.srvs {
			if s == nil {
				continue
			}
			if _, self := s.repl.node.Leader(); self {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatal("no leader elected")
	return -1
}

// TestReplicatedFollowerNamesLeader: every replica knows the leader, and
// a client given only a follower's address is sent on to the leader
// (NOT_LEADER with its address) and served.
func TestReplicatedFollowerNamesLeader(t *testing.T) {
	g := newGroup(t, 3)
	lead := g.leader()
	follower := (lead + 1) % 3
	deadline := time.Now().Add(5 * time.Second)
	for {
		if id, _ := g.srvs[follower].repl.node.Leader(); id == g.peers[lead].ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the follower does not learn the leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cl := dial(t, g.peers[follower].Addr, client.Cred{})
	ctx := context.Background()
	if _, err := cl.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatalf("mkdir through a follower's address: %v", err)
	}
	if _, err := cl.Stat(ctx, "/d"); err != nil {
		t.Fatalf("stat: %v", err)
	}
	if _, err := cl.Mkdir(ctx, "/d", 0o755); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("second mkdir: %v, want EEXIST", err)
	}
	fg, err := g.srvs[follower].Group(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fg.Role != "Follower" || fg.Leader != g.peers[lead].ID || fg.LeaderAddr != g.peers[lead].Addr || len(fg.Members) != 3 {
		t.Fatalf("follower's view: %v", fg)
	}
	lg, err := g.srvs[lead].Group(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg.Role != "Leader" || lg.Commit < 2 || lg.Members[follower].State == "" {
		t.Fatalf("leader's view: %v", lg)
	}
	// STATUS tells the replica's own directory and start.
	st, err := cl.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if age := time.Since(st.Started); age < 0 || age > time.Minute || st.Dir != g.dirs[lead] {
		t.Fatalf("status: started %v, dir %q; want a start within the last minute and %q", st.Started, st.Dir, g.dirs[lead])
	}
}

// rawCreate sends MKNOD of name in the root as client id's first call.
func rawCreate(t *testing.T, addrs []string, id rpc.ClientID, name string) (uint32, uint64) {
	t.Helper()
	c, err := rpc.DialAny(addrs, rpc.ClientConfig{ClientID: id, CallTimeout: 2 * time.Second, OpTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := proto.Marshal(&pb.CreateRequest{Parent: 1, Name: name, Mode: uint32(syscall.S_IFREG | 0o644)})
	st, rep, err := c.Call(context.Background(), uint16(pb.Method_MKNOD), rpc.Cred{}, req)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	var attr pb.AttrReply
	if st == 0 {
		if err := proto.Unmarshal(rep, &attr); err != nil {
			t.Fatal(err)
		}
	}
	return st, attr.GetAttr().GetIno()
}

// TestReplicatedFailoverKeepsWritesAndRetries: the leader is stopped
// after a create; the new leader has it, answers the create's retry (same
// client, same call id) from the replicated retry cache instead of
// applying it again (EEXIST), and the surviving replicas' checkpoints at
// the same index are byte-identical.
func TestReplicatedFailoverKeepsWritesAndRetries(t *testing.T) {
	g := newGroup(t, 3)
	lead := g.leader()
	var id rpc.ClientID
	copy(id[:], "replicated-test!")
	all := []string{g.peers[0].Addr, g.peers[1].Addr, g.peers[2].Addr}
	st, ino := rawCreate(t, all, id, "f")
	if st != 0 || ino == 0 {
		t.Fatalf("create: status %d ino %d", st, ino)
	}
	g.stop(lead)
	next := g.leader()
	if next == lead {
		t.Fatal("the stopped replica is still the leader")
	}
	// The same call again, at the new leader: applied once.
	st2, ino2 := rawCreate(t, all, id, "f")
	if st2 != 0 || ino2 != ino {
		t.Fatalf("retried create at the new leader: status %d ino %d, want 0 and %d", st2, ino2, ino)
	}
	// A new call of another client fails: the file exists.
	var other rpc.ClientID
	copy(other[:], "another-client!!")
	if st3, _ := rawCreate(t, all, other, "f"); syscall.Errno(st3) != syscall.EEXIST {
		t.Fatalf("create by another client: status %d, want EEXIST", st3)
	}
	if hits := g.srvs[next].Stats().RetryHits; hits == 0 {
		t.Fatal("the retry was not answered from the retry cache")
	}
	// Both survivors reach the same index and hold the same bytes.
	a, b := next, 3-lead-next
	deadline := time.Now().Add(10 * time.Second)
	for {
		ia, ca, err := g.srvs[a].repl.checkpointOf()
		if err != nil {
			t.Fatal(err)
		}
		ib, cb, err := g.srvs[b].repl.checkpointOf()
		if err != nil {
			t.Fatal(err)
		}
		if ia == ib {
			if !bytes.Equal(ca, cb) {
				t.Fatalf("checkpoints at index %d differ (%d and %d bytes)", ia, len(ca), len(cb))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas stay at indexes %d and %d", ia, ib)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The stopped replica comes back, catches up, and agrees.
	g.start(lead)
	deadline = time.Now().Add(10 * time.Second)
	for {
		ia, ca, _ := g.srvs[next].repl.checkpointOf()
		il, cl, _ := g.srvs[lead].repl.checkpointOf()
		if ia == il && bytes.Equal(ca, cl) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted replica at %d, leader at %d", il, ia)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSame waits until replicas a and b hold the same state at the same
// index.
func (g *group) waitSame(a, b int) uint64 {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ia, ca, err := g.srvs[a].repl.checkpointOf()
		if err != nil {
			g.t.Fatal(err)
		}
		ib, cb, err := g.srvs[b].repl.checkpointOf()
		if err != nil {
			g.t.Fatal(err)
		}
		if ia == ib && bytes.Equal(ca, cb) {
			return ia
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("replicas %d and %d stay apart: indexes %d and %d", a+1, b+1, ia, ib)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicatedSnapshotCatchUp: a replica down while the group took
// snapshots and dropped the log behind them comes back from a snapshot
// streamed by the leader, then the log, and holds the same state; a
// replica restarted from its own snapshot does too.
func TestReplicatedSnapshotCatchUp(t *testing.T) {
	g := newGroupSnap(t, 3, 40)
	lead := g.leader()
	down := (lead + 1) % 3
	g.stop(down)
	cl := dial(t, g.peers[lead].Addr, client.Cred{})
	ctx := context.Background()
	for i := range 300 {
		if _, err := cl.Create(ctx, fmt.Sprintf("/f%d", i), 0o644); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	st, err := g.srvs[lead].Group(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Snapshot < 200 {
		t.Fatalf("leader's newest snapshot at %d after 300 creates, snapshots every 40", st.Snapshot)
	}
	g.start(down)
	idx := g.waitSame(lead, down)
	ds, err := g.srvs[down].Group(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Snapshot < 200 {
		t.Fatalf("the returning replica's snapshot is at %d: it did not catch up from one", ds.Snapshot)
	}
	// Restart the third from its own snapshot and log.
	third := 3 - lead - down
	g.stop(third)
	g.start(third)
	g.waitSame(lead, third)
	if idx < 300 {
		t.Fatalf("state index %d after 300 creates", idx)
	}
	// The caught-up replica serves as a voter: with the third stopped,
	// the leader and it still commit.
	g.stop(third)
	if _, err := cl.Create(ctx, "/after", 0o644); err != nil {
		t.Fatalf("create with the caught-up replica as the only other voter: %v", err)
	}
}

// TestReplicatedTransfer: GROUP_TRANSFER sent to a follower is sent on to
// the leader, which hands leadership to the replica named.
func TestReplicatedTransfer(t *testing.T) {
	g := newGroup(t, 3)
	lead := g.leader()
	to := (lead + 2) % 3
	all := []string{g.peers[0].Addr, g.peers[1].Addr, g.peers[2].Addr}
	c, err := rpc.DialAny([]string{g.peers[(lead+1)%3].Addr}, rpc.ClientConfig{CallTimeout: 5 * time.Second, OpTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := proto.Marshal(&pb.GroupTransferRequest{To: g.peers[to].ID})
	st, _, err := c.Call(context.Background(), uint16(pb.Method_GROUP_TRANSFER), rpc.Cred{}, req)
	if err != nil || st != 0 {
		t.Fatalf("transfer: status %d, %v", st, err)
	}
	if now := g.leader(); now != to {
		t.Fatalf("leader is replica %d after the transfer to %d", now+1, to+1)
	}
	var id rpc.ClientID
	copy(id[:], "after-transfer!!")
	if st, _ := rawCreate(t, all, id, "x"); st != 0 {
		t.Fatalf("create after the transfer: status %d", st)
	}
}
