package router

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/faults"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// A group's replica in use goes silent with its connection open, as a
// SIGSTOPped process does: the router's probe finds it, the call held by
// it fails over to the next replica, and the client's create succeeds
// within its one attempt's time, which the silent replica alone would
// have used up.
func TestRouterMovesOnFromASilentReplica(t *testing.T) {
	_, root := startPartition(t, 0)
	_, leader := startPartition(t, 1)
	stopped, err := faults.NewProxy(leader) // replica 1, to be "stopped"
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped.Close() })
	src := newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/g", Vpart: 1, Target: "/"},
	}, map[uint32][]string{0: {root}, 1: {stopped.Addr(), leader}})
	r := startRouter(t, src, Config{Root: []string{root}})
	c, err := client.Dial(r.Addr(), client.Options{Cred: &client.Cred{}, CallTimeout: 10 * time.Second, OpTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := testCtx(t)
	if _, err := c.Mkdir(ctx, "/g/before", 0o755); err != nil {
		t.Fatalf("mkdir through the first replica: %v", err)
	}
	if stopped.Forwarded(faults.Forward) == 0 {
		t.Fatal("the first replica was not used: the test does not test moving on from it")
	}

	stopped.Partition() // silent, connections open
	if _, err := c.Mkdir(ctx, "/g/after", 0o755); err != nil {
		t.Fatalf("mkdir while the replica in use is silent: %v", err)
	}
	if stopped.Held(faults.Forward) == 0 {
		t.Fatal("nothing was held by the silent replica: the call never went to it")
	}
	if _, err := c.Stat(ctx, "/g/after"); err != nil {
		t.Fatalf("stat after moving on: %v", err)
	}
}

// startSlow starts a replica stand-in that answers NULL at once and holds
// every other call until it has answered a NULL (a probe) and a while
// more, then answers it with status 0. It counts the GETATTR calls (a
// router also sends its own, such as the credentials' copy).
func startSlow(t *testing.T, hold time.Duration) (addr string, calls *atomic.Int64) {
	t.Helper()
	calls = new(atomic.Int64)
	probed := make(chan struct{})
	var once atomic.Bool
	srv := rpc.NewServer(rpc.HandlerFunc(func(c *rpc.Call) {
		if c.Method == uint16(pb.Method_NULL) {
			c.Reply(0, nil)
			if once.CompareAndSwap(false, true) {
				close(probed)
			}
			return
		}
		if c.Method == uint16(pb.Method_GETATTR) {
			calls.Add(1)
		}
		go func() {
			select {
			case <-probed:
				time.Sleep(hold)
			case <-time.After(bound):
			}
			c.Reply(0, nil)
		}()
	}), rpc.ServerConfig{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), calls
}

// A replica that is slow to answer a call but answers its probe keeps the
// call: the router does not abandon it, and the call is not sent to
// another replica.
func TestRouterKeepsASlowReplica(t *testing.T) {
	_, root := startPartition(t, 0)
	live := defaultLiveness
	slow, slowCalls := startSlow(t, 3*live.timeout+time.Duration(live.quiet+1)*live.every)
	name := slow
	other, otherCalls := startNotLeader(t, &name)
	src := newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/g", Vpart: 1, Target: "/"},
	}, map[uint32][]string{0: {root}, 1: {slow, other}})
	r := startRouter(t, src, Config{Root: []string{root}})
	rc, err := rpc.Dial(r.Addr(), rpc.ClientConfig{CallTimeout: bound, OpTimeout: bound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	req, _ := proto.Marshal(&pb.NodeRequest{Ino: protocol.RootIno(1)})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	st, _, err := rc.Call(ctx, uint16(pb.Method_GETATTR), rpc.Cred{}, req)
	if err != nil || st != 0 {
		t.Fatalf("getattr at a slow replica: status %d, %v", st, err)
	}
	if n := slowCalls.Load(); n != 1 {
		t.Fatalf("the slow replica got the call %d times, want once (not abandoned, not retried)", n)
	}
	if n := otherCalls.Load(); n != 0 {
		t.Fatalf("the other replica got %d calls, want none", n)
	}
}

// TestFollowSkipsSilentServer: a NOT_LEADER naming a server the watchdog
// found silent moves the partition on to another replica, not back to
// it; once the hold is over, the hint is followed again.
func TestFollowSkipsSilentServer(t *testing.T) {
	pt := &partition{servers: []*server{{addr: "a"}, {addr: "b"}, {addr: "c"}}}
	pt.cur.Store(1)
	pt.follow(1, "a")
	if got := pt.cur.Load(); got != 0 {
		t.Fatalf("hint of a live leader: partition at %d, want 0", got)
	}
	pt.servers[0].silentUntil.Store(monotime() + int64(time.Minute))
	pt.cur.Store(1)
	pt.follow(1, "a")
	if got := pt.cur.Load(); got != 2 {
		t.Fatalf("hint naming the silent server: partition at %d, want 2", got)
	}
	pt.follow(2, "a") // the next one names it too: on, past it
	if got := pt.cur.Load() % 3; got != 1 {
		t.Fatalf("second hint naming the silent server: partition at %d, want 1", got)
	}
	pt.servers[0].silentUntil.Store(monotime() - 1)
	pt.cur.Store(1)
	pt.follow(1, "a")
	if got := pt.cur.Load(); got != 0 {
		t.Fatalf("hint after the hold: partition at %d, want 0", got)
	}
}

// TestSilentServerFollowedOnceItAnswers: a replica found silent is probed
// at every look of the watchdog, and once it answers it is no longer held
// silent, so that a NOT_LEADER naming it (it may be the next leader) is
// followed at once, not after the hold.
func TestSilentServerFollowedOnceItAnswers(t *testing.T) {
	_, root := startPartition(t, 0)
	_, one := startPartition(t, 1)
	name := one
	other, _ := startNotLeader(t, &name)
	src := newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/g", Vpart: 1, Target: "/"},
	}, map[uint32][]string{0: {root}, 1: {one, other}})
	r := startRouter(t, src, Config{Root: []string{root}})
	deadline := time.Now().Add(bound)
	var s *server
	for s == nil || s.clients.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the replica is not dialed")
		}
		time.Sleep(5 * time.Millisecond)
		r.pool.mu.Lock()
		s = r.pool.servers[one]
		r.pool.mu.Unlock()
	}
	s.silentUntil.Store(monotime() + int64(time.Minute))
	for s.silent() {
		if time.Now().After(deadline) {
			t.Fatal("a replica that answers is still held silent")
		}
		time.Sleep(5 * time.Millisecond)
	}
	pt := r.view.Load().parts[1]
	pt.cur.Store(1)
	pt.follow(1, one)
	if got := pt.cur.Load(); got != 0 {
		t.Fatalf("hint naming the replica that answers again: partition at %d, want 0", got)
	}
}
