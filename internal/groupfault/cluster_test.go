package groupfault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/faults"
	"github.com/canopyfs/canopy/internal/router"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/testaddr"
)

// The cluster: replica i (0-based, Raft id i+1) serves clients on addrs[i]
// and listens for the other replicas on raft[i]; its messages to replica
// j go through links[i][j], a proxy to raft[j], so that every direction
// of every pair of replicas can be cut on its own.
type cluster struct {
	t      *testing.T
	bin    string
	dir    string
	addrs  []string
	raft   []string
	links  [][]*faults.Proxy
	procs  []*exec.Cmd
	logs   []*os.File
	router *router.Router
	tick   time.Duration
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// canopyBinary builds the canopy command once per test binary.
func canopyBinary(t *testing.T) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "canopy-groupfault-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "canopy")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/canopyfs/canopy/cmd/canopy")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// newCluster starts n replicas and a router.
func newCluster(t *testing.T, n int, tick time.Duration) *cluster {
	c := &cluster{t: t, bin: canopyBinary(t), dir: t.TempDir(), tick: tick,
		procs: make([]*exec.Cmd, n), logs: make([]*os.File, n)}
	for range n {
		c.addrs = append(c.addrs, testaddr.Free(t))
		c.raft = append(c.raft, testaddr.Free(t))
	}
	c.links = make([][]*faults.Proxy, n)
	for i := range n {
		c.links[i] = make([]*faults.Proxy, n)
		for j := range n {
			if i == j {
				continue
			}
			p, err := faults.NewProxy(c.raft[j])
			if err != nil {
				t.Fatal(err)
			}
			c.links[i][j] = p
		}
	}
	t.Cleanup(c.close)
	for i := range n {
		c.start(i)
	}
	c.waitLeader(20 * time.Second)
	// The routing table names the group, so that the router finds it.
	cl, err := client.Dial(strings.Join(c.addrs, ","), client.Options{Cred: &client.Cred{}, OpTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cl.UpdateTables(ctx, client.TablesUpdate{SetRoutes: []client.Route{{VPart: 0, Addrs: c.addrs}}}); err != nil {
		t.Fatalf("set the routing table: %v", err)
	}
	r, err := router.Start(ctx, router.Config{Listen: "127.0.0.1:0", Root: c.addrs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	c.router = r
	return c
}

// start runs replica i's process.
func (c *cluster) start(i int) {
	c.t.Helper()
	raftPeers := make([]string, len(c.addrs))
	for j := range c.addrs {
		if j == i {
			raftPeers[j] = c.raft[i]
		} else {
			raftPeers[j] = c.links[i][j].Addr()
		}
	}
	if c.logs[i] == nil {
		f, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("r%d.log", i+1)))
		if err != nil {
			c.t.Fatal(err)
		}
		c.logs[i] = f
	}
	cmd := exec.Command(c.bin, "meta", "--dir", filepath.Join(c.dir, fmt.Sprintf("r%d", i+1)),
		"--listen", c.addrs[i], "--partition", "0", "--peers", strings.Join(c.addrs, ","),
		"--raft-peers", strings.Join(raftPeers, ","), "--raft-tick", c.tick.String(),
		"--storage", "file://"+filepath.Join(c.dir, "objects"), "--no-gc")
	cmd.Stdout, cmd.Stderr = c.logs[i], c.logs[i]
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start replica %d: %v", i+1, err)
	}
	c.procs[i] = cmd
}

// kill SIGKILLs replica i and reaps it.
func (c *cluster) kill(i int) {
	if p := c.procs[i]; p != nil {
		p.Process.Signal(syscall.SIGCONT) // a stopped process dies too
		p.Process.Kill()
		p.Wait()
		c.procs[i] = nil
	}
}

func (c *cluster) signal(i int, sig syscall.Signal) {
	if p := c.procs[i]; p != nil {
		p.Process.Signal(sig)
	}
}

func (c *cluster) close() {
	if c.router != nil {
		c.router.Close()
	}
	for i := range c.procs {
		c.kill(i)
	}
	for _, row := range c.links {
		for _, p := range row {
			if p != nil {
				p.Close()
			}
		}
	}
	for _, f := range c.logs {
		if f != nil {
			f.Close()
		}
	}
	if c.t.Failed() {
		for i := range c.logs {
			data, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("r%d.log", i+1)))
			if len(data) > 8000 {
				data = data[len(data)-8000:]
			}
			c.t.Logf("replica %d log (tail):\n%s", i+1, data)
		}
	}
}

// heal lifts every cut.
func (c *cluster) heal() {
	for _, row := range c.links {
		for _, p := range row {
			if p != nil {
				p.Heal()
			}
		}
	}
}

// group asks replica i for its view of the group.
func (c *cluster) group(i int, verify bool) (*pb.GroupReply, error) {
	rc, err := rpc.Dial(c.addrs[i], rpc.ClientConfig{CallTimeout: time.Second, OpTimeout: time.Second, MaxRetries: 0})
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	req, _ := proto.Marshal(&pb.GroupRequest{Verify: verify})
	st, rep, err := rc.Call(context.Background(), uint16(pb.Method_GROUP_STATUS), rpc.Cred{}, req)
	if err != nil {
		return nil, err
	}
	if st != 0 {
		return nil, fmt.Errorf("group status: status %d", st)
	}
	var g pb.GroupReply
	if err := proto.Unmarshal(rep, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// leader returns the replica that the live replicas of the highest term
// name leader, or -1.
func (c *cluster) leader() int {
	best, term := -1, uint64(0)
	for i := range c.addrs {
		if c.procs[i] == nil {
			continue
		}
		g, err := c.group(i, false)
		if err != nil || g.Leader == 0 {
			continue
		}
		if g.Term > term || best < 0 {
			best, term = int(g.Leader)-1, g.Term
		}
	}
	return best
}

func (c *cluster) waitLeader(d time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if l := c.leader(); l >= 0 {
			return l
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return -1
}

// converge waits until every replica is at the same state index with no
// client traffic, and checks that their states are byte-identical (by
// checksum) and pass the engine's invariant check.
func (c *cluster) converge(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		var views []*pb.GroupReply
		for i := range c.addrs {
			g, err := c.group(i, true)
			if err != nil {
				last = fmt.Sprintf("replica %d: %v", i+1, err)
				break
			}
			views = append(views, g)
		}
		if len(views) == len(c.addrs) {
			same := true
			for _, v := range views[1:] {
				same = same && v.StateIndex == views[0].StateIndex
			}
			if same {
				for i, v := range views {
					if v.CheckError != "" {
						c.t.Fatalf("replica %d fails the engine's check: %s", i+1, v.CheckError)
					}
					if !bytes.Equal(v.StateSha256, views[0].StateSha256) {
						c.t.Fatalf("replicas 1 and %d differ at index %d: %x and %x", i+1, v.StateIndex,
							views[0].StateSha256, v.StateSha256)
					}
				}
				c.t.Logf("all %d replicas at state index %d, sha256 %x", len(views), views[0].StateIndex, views[0].StateSha256)
				return
			}
			last = fmt.Sprintf("state indexes %d %d %d", views[0].StateIndex, views[1].StateIndex, views[len(views)-1].StateIndex)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("replicas do not converge: %s", last)
}

// isUnknown reports an error that says nothing of whether the operation
// took effect.
func isUnknown(err error) bool {
	var errno syscall.Errno
	return err != nil && !errors.As(err, &errno)
}

// caughtUp waits until the leader sees every replica active and at most
// 100 entries behind.
func (c *cluster) caughtUp(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if l := c.leader(); l >= 0 && c.agree(l) {
			if g, err := c.group(l, false); err == nil && len(g.Members) == len(c.addrs) {
				ok := true
				for _, m := range g.Members {
					ok = ok && m.Active && m.Lag <= 100
				}
				if ok {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatal("replicas do not catch up")
}

// agree reports whether every running replica names replica l its
// leader, in the same term: a replica just continued after SIGSTOP, or
// restarted, has heard from the leader. (The leader's own figures for a
// replica it has not heard from lately can still look current.)
func (c *cluster) agree(l int) bool {
	var term uint64
	for i := range c.addrs {
		if c.procs[i] == nil {
			continue
		}
		g, err := c.group(i, false)
		if err != nil || int(g.Leader)-1 != l || term != 0 && g.Term != term {
			return false
		}
		term = g.Term
	}
	return true
}
