package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/testaddr"
)

// startJoin opens and serves replica i, an empty directory, with
// RaftJoin: it waits to be added instead of bootstrapping.
func (g *group) startJoin(i int) {
	g.t.Helper()
	s, err := Open(Config{Dir: g.dirs[i], Peers: g.peers, ReplicaID: g.peers[i].ID, RaftJoin: true,
		RaftTick: 10 * time.Millisecond, RaftSnapshotEntries: g.snap, RaftCatchUpEntries: g.snap / 4,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		g.t.Fatalf("open replica %d: %v", i+1, err)
	}
	ln, err := net.Listen("tcp", g.peers[i].Addr)
	if err != nil {
		s.Close()
		g.t.Fatal(err)
	}
	go s.Serve(ln)
	g.srvs[i] = s
}

// groupChange sends a GROUP_ADD or GROUP_REMOVE to the group's replicas
// addrs (following NOT_LEADER) and returns the group the leader reports.
func groupChange(t *testing.T, addrs []string, m pb.Method, req proto.Message) *pb.GroupReply {
	t.Helper()
	c, err := rpc.DialAny(addrs, rpc.ClientConfig{CallTimeout: 30 * time.Second, OpTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data, _ := proto.Marshal(req)
	st, rep, err := c.Call(context.Background(), uint16(m), rpc.Cred{}, data)
	if err != nil || st != 0 {
		var d pb.ErrorDetail
		proto.Unmarshal(rep, &d)
		t.Fatalf("%s: status %d %q, %v", m, st, d.Message, err)
	}
	var g pb.GroupReply
	if err := proto.Unmarshal(rep, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// member returns g's member id, or nil.
func member(g *pb.GroupReply, id uint64) *pb.GroupMember {
	i := slices.IndexFunc(g.Members, func(m *pb.GroupMember) bool { return m.Id == id })
	if i < 0 {
		return nil
	}
	return g.Members[i]
}

// TestReplicatedAddAndRemove: a fourth replica, started on an empty
// directory, is added to a group whose log no longer reaches back to its
// start: it catches up from a snapshot as a learner, becomes a voter with
// a checkpoint byte-identical to the leader's at the same index, and its
// vote counts (with one original replica down the group still commits).
// The replica that is down is removed, then the leader itself (which hands
// leadership over first); the group keeps serving, and a restarted
// original replica, whose Config.Peers lists only the first three, knows
// the fourth's address from its log and snapshot.
func TestReplicatedAddAndRemove(t *testing.T) {
	g := newGroupSnap(t, 3, 40)
	lead := g.leader()
	cl := dial(t, g.peers[lead].Addr, client.Cred{})
	ctx := context.Background()
	for i := range 300 {
		if _, err := cl.Create(ctx, fmt.Sprintf("/f%d", i), 0o644); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	orig := []string{g.peers[0].Addr, g.peers[1].Addr, g.peers[2].Addr}

	// The fourth replica: empty directory, knows the group from its peers.
	g.peers = append(g.peers, Peer{ID: 4, Addr: testaddr.Free(t), RaftAddr: testaddr.Free(t)})
	g.dirs = append(g.dirs, filepath.Join(t.TempDir(), "r4"))
	g.srvs = append(g.srvs, nil)
	g.startJoin(3)
	gr := groupChange(t, orig, pb.Method_GROUP_ADD, &pb.GroupAddRequest{Id: 4, Addr: g.peers[3].Addr, RaftAddr: g.peers[3].RaftAddr})
	if m := member(gr, 4); m == nil || m.Learner || len(gr.Members) != 4 {
		t.Fatalf("after GROUP_ADD: members %v", gr.Members)
	}
	lead = g.leader()
	idx := g.waitSame(lead, 3)
	fourth, err := g.srvs[3].Group(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fourth.Snapshot < 200 {
		t.Fatalf("the new replica's snapshot is at %d: it did not catch up from one", fourth.Snapshot)
	}
	if idx < 300 {
		t.Fatalf("state index %d after 300 creates", idx)
	}
	for i := range 3 {
		// A follower applies the membership change when it learns the
		// commit, which may come after the leader and the new replica.
		g.waitSame(lead, i)
		if p := g.srvs[i].repl.peer(4); p.Addr != g.peers[3].Addr || p.RaftAddr != g.peers[3].RaftAddr {
			t.Fatalf("replica %d knows replica 4 as %+v", i+1, p)
		}
	}

	// Its vote counts: with one of the first three down, 3 of 4 voters
	// are up, the new one among them.
	down := (lead + 1) % 3
	g.stop(down)
	if _, err := cl.Create(ctx, "/with-four", 0o644); err != nil {
		t.Fatalf("create with replica %d down and replica 4 voting: %v", down+1, err)
	}

	// Remove the replica that is down.
	all := []string{g.peers[0].Addr, g.peers[1].Addr, g.peers[2].Addr, g.peers[3].Addr}
	gr = groupChange(t, all, pb.Method_GROUP_REMOVE, &pb.GroupRemoveRequest{Id: g.peers[down].ID})
	if member(gr, g.peers[down].ID) != nil || len(gr.Members) != 3 {
		t.Fatalf("after removing replica %d: members %v", down+1, gr.Members)
	}
	if _, err := cl.Create(ctx, "/after-remove", 0o644); err != nil {
		t.Fatalf("create after the removal: %v", err)
	}

	// Remove the leader itself: it hands leadership over, the call
	// follows to the new leader, which removes it.
	lead = g.leader()
	gr = groupChange(t, all, pb.Method_GROUP_REMOVE, &pb.GroupRemoveRequest{Id: g.peers[lead].ID})
	if member(gr, g.peers[lead].ID) != nil || len(gr.Members) != 2 {
		t.Fatalf("after removing the leader %d: members %v", lead+1, gr.Members)
	}
	g.stop(lead)
	next := g.leader()
	cl2 := dial(t, g.peers[next].Addr, client.Cred{})
	if _, err := cl2.Create(ctx, "/two-left", 0o644); err != nil {
		t.Fatalf("create with two voters left: %v", err)
	}
	if _, err := cl2.Stat(ctx, "/f299"); err != nil {
		t.Fatalf("stat of a file made before the changes: %v", err)
	}
	// The remaining original replica, restarted, knows replica 4 from its
	// snapshot (its Config.Peers lists only the first three).
	other := 3 - lead - down
	if other == 3 || g.srvs[other] == nil {
		t.Fatalf("bookkeeping: replicas lead %d down %d other %d", lead, down, other)
	}
	g.stop(other)
	g.peers = g.peers[:3]
	g.start(other)
	g.peers = append(g.peers, Peer{ID: 4, Addr: all[3], RaftAddr: g.srvs[3].repl.peer(4).RaftAddr})
	g.waitSame(other, 3)
	if p := g.srvs[other].repl.peer(4); p.Addr != all[3] {
		t.Fatalf("restarted replica %d knows replica 4 as %+v", other+1, p)
	}
	if _, err := cl2.Create(ctx, "/after-restart", 0o644); err != nil {
		t.Fatalf("create after the restart: %v", err)
	}
}

// A snapshot of a replica that knows added members carries them: a state
// restored from it knows them too, and a snapshot of a group never
// changed has no members section (it is as before members were kept).
func TestReplicatedSnapshotCarriesMembers(t *testing.T) {
	cfg := &Config{Logger: slog.New(slog.DiscardHandler)}
	newState := func() *replicatedState {
		sm := newStateMachine(cfg.RetryCacheSize, cfg.RetryCacheTTL, cfg.Logger)
		sm.eng = engine.New(0, 0)
		return &replicatedState{sm: sm, cfg: cfg, members: map[uint64]Peer{}}
	}
	a := newState()
	var plain bytes.Buffer
	if err := snapshotTo(a, &plain); err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(plain.Bytes(), membersMagic) {
		t.Fatal("a snapshot without added members starts with the members section")
	}
	info, _ := proto.Marshal(&pb.GroupAddRequest{Id: 5, Addr: "127.0.0.1:5", RaftAddr: "127.0.0.1:1005"})
	a.ApplyMembership(10, []uint64{5}, nil, info)
	info, _ = proto.Marshal(&pb.GroupAddRequest{Id: 4, Addr: "127.0.0.1:4", RaftAddr: "127.0.0.1:1004"})
	a.ApplyMembership(11, []uint64{4}, nil, info)
	var snap bytes.Buffer
	if err := snapshotTo(a, &snap); err != nil {
		t.Fatal(err)
	}
	b := newState()
	var told map[uint64]Peer
	b.onMembers = func(m map[uint64]Peer) { told = m }
	if err := b.Restore(bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]Peer{4: {4, "127.0.0.1:4", "127.0.0.1:1004"}, 5: {5, "127.0.0.1:5", "127.0.0.1:1005"}}
	if !maps.Equal(b.members, want) || !maps.Equal(told, want) {
		t.Fatalf("restored members %v, told %v; want %v", b.members, told, want)
	}
	// The same state gives the same bytes.
	var again bytes.Buffer
	if err := snapshotTo(b, &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), snap.Bytes()) {
		t.Fatal("a restored state's snapshot differs from the one it came from")
	}
	// Removal forgets the address.
	b.ApplyMembership(12, nil, []uint64{5}, nil)
	if _, ok := b.members[5]; ok || len(told) != 1 {
		t.Fatalf("after removing 5: members %v, told %v", b.members, told)
	}
	// A snapshot of the old format restores with no members.
	c := newState()
	if err := c.Restore(bytes.NewReader(plain.Bytes())); err != nil || len(c.members) != 0 {
		t.Fatalf("old-format snapshot: members %v, %v", c.members, err)
	}
}

// snapshotTo writes rs's snapshot to w at once, as the Node does on its
// snapshot goroutine.
func snapshotTo(rs *replicatedState, w io.Writer) error {
	write, release, err := rs.Snapshot()
	if err != nil {
		return err
	}
	defer release()
	return write(w)
}
