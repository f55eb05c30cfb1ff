package router

import (
	"net"
	"sync/atomic"
	"testing"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// startNotLeader starts a replica stand-in that answers every call
// NOT_LEADER naming leader (or no one, if leader is ""), and counts them.
func startNotLeader(t *testing.T, leader *string) (addr string, calls *atomic.Int64) {
	t.Helper()
	calls = new(atomic.Int64)
	srv := rpc.NewServer(rpc.HandlerFunc(func(c *rpc.Call) {
		calls.Add(1)
		c.Reply(rpc.StatusNotLeader, []byte(*leader))
	}), rpc.ServerConfig{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), calls
}

// A group whose first listed replica is not the leader: the router moves
// the partition to the leader that replica names, the client sees no
// error, and later calls go to the leader directly.
func TestRouterFollowsNotLeaderToTheLeader(t *testing.T) {
	_, root := startPartition(t, 0)
	_, leader := startPartition(t, 1)
	follower, followerCalls := startNotLeader(t, &leader)
	src := newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/g", Vpart: 1, Target: "/"},
	}, map[uint32][]string{0: {root}, 1: {follower, leader}})
	r := startRouter(t, src, Config{Root: []string{root}})
	c := dial(t, r.Addr())
	ctx := testCtx(t)
	if _, err := c.Mkdir(ctx, "/g/d", 0o755); err != nil {
		t.Fatalf("mkdir in a group whose first replica is a follower: %v", err)
	}
	if followerCalls.Load() == 0 {
		t.Fatal("the follower was never asked: the test does not test following")
	}
	before := followerCalls.Load()
	for range 20 {
		if _, err := c.Stat(ctx, "/g/d"); err != nil {
			t.Fatalf("stat after the move: %v", err)
		}
	}
	if n := followerCalls.Load() - before; n != 0 {
		t.Fatalf("%d calls still went to the follower", n)
	}
}

// While no replica knows a leader, the router answers UNAVAILABLE and the
// client keeps retrying; once a leader is named, the call goes through.
func TestRouterWaitsOutAnElection(t *testing.T) {
	_, root := startPartition(t, 0)
	_, real := startPartition(t, 1)
	none := ""
	a, aCalls := startNotLeader(t, &none)
	b, bCalls := startNotLeader(t, &none)
	src := newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/g", Vpart: 1, Target: "/"},
	}, map[uint32][]string{0: {root}, 1: {a, b, real}})
	r := startRouter(t, src, Config{Root: []string{root}})
	c := dial(t, r.Addr())
	if _, err := c.Stat(testCtx(t), "/g"); err != nil {
		t.Fatalf("stat across an election: %v", err)
	}
	if aCalls.Load() == 0 || bCalls.Load() == 0 {
		t.Fatalf("replicas asked: %d and %d; want both tried before the leader", aCalls.Load(), bCalls.Load())
	}
}
