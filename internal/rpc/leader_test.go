package rpc

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A replica that is not its group's leader answers NOT_LEADER with the
// leader's address; the client moves there, the call and the calls in
// flight with it end at the leader without an error, and later calls go
// straight to it.
func TestNotLeaderMovesTheClientToTheLeader(t *testing.T) {
	checkGoroutines(t)
	leader := startServer(t, named("leader"), ServerConfig{})
	var followerCalls atomic.Int64
	follower := startServer(t, HandlerFunc(func(c *Call) {
		followerCalls.Add(1)
		c.Reply(StatusNotLeader, []byte(leader.addr))
	}), ServerConfig{})
	// The client knows only the follower: it learns the leader's address.
	c := dial(t, follower.addr, ClientConfig{Logger: quietLogger()})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				st, reply, err := c.Call(ctx, 1, Cred{}, nil)
				if err != nil || st != 0 || string(reply) != "leader" {
					t.Errorf("call: status %d, reply %q, err %v; want the leader's answer", st, reply, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	before := followerCalls.Load()
	if before == 0 {
		t.Fatal("the follower saw no call")
	}
	for range 20 {
		if _, reply, err := c.Call(ctx, 1, Cred{}, nil); err != nil || string(reply) != "leader" {
			t.Fatalf("call after moving: %q, %v", reply, err)
		}
	}
	if n := followerCalls.Load(); n != before {
		t.Fatalf("%d calls still went to the follower after the client moved", n-before)
	}
}

// During an election (NOT_LEADER without an address, or UNAVAILABLE from a
// router) a call is retried past MaxRetries until the group answers, and
// fails with ErrNoLeader when the election outlasts its deadline.
func TestElectionIsWaitedForUntilTheDeadline(t *testing.T) {
	checkGoroutines(t)
	for _, status := range []uint32{StatusNotLeader, StatusUnavailable} {
		var elected atomic.Bool
		var refused atomic.Int64
		srv := startServer(t, HandlerFunc(func(c *Call) {
			if !elected.Load() {
				refused.Add(1)
				c.Reply(status, nil)
				return
			}
			c.Reply(0, []byte("ok"))
		}), ServerConfig{})
		c := dial(t, srv.addr, ClientConfig{Logger: quietLogger(), MaxRetries: 2, OpTimeout: 20 * time.Second})
		done := make(chan error, 1)
		go func() {
			_, reply, err := c.Call(testCtx(t), 1, Cred{}, nil)
			if err == nil && string(reply) != "ok" {
				err = errors.New("wrong reply " + string(reply))
			}
			done <- err
		}()
		// Well past MaxRetries refusals, then the election ends.
		waitFor(t, "refusals beyond MaxRetries", func() bool { return refused.Load() > 10 })
		elected.Store(true)
		if err := recv(t, done); err != nil {
			t.Fatalf("status %#x: call across the election: %v", status, err)
		}

		elected.Store(false)
		short := dial(t, srv.addr, ClientConfig{Logger: quietLogger(), OpTimeout: 200 * time.Millisecond})
		_, _, err := short.Call(testCtx(t), 1, Cred{}, nil)
		if !errors.Is(err, ErrNoLeader) {
			t.Fatalf("status %#x: call through an endless election: %v, want ErrNoLeader", status, err)
		}
	}
}

// A NOT_LEADER naming garbage, or more new servers than the client keeps,
// does not grow the client's list without bound.
func TestNotLeaderAddressesAreBounded(t *testing.T) {
	checkGoroutines(t)
	var n atomic.Int64
	var leaderAddr string
	srv := startServer(t, HandlerFunc(func(c *Call) {
		i := n.Add(1)
		switch {
		case i == 1:
			c.Reply(StatusNotLeader, []byte("not an address"))
		case i < 40:
			c.Reply(StatusNotLeader, []byte(deadAddrFor(int(i))))
		default:
			c.Reply(0, []byte(leaderAddr))
		}
	}), ServerConfig{})
	leaderAddr = srv.addr
	c := dial(t, srv.addr, ClientConfig{Logger: quietLogger(), DialTimeout: 100 * time.Millisecond, OpTimeout: 10 * time.Second})
	c.Call(testCtx(t), 1, Cred{}, nil) // may fail: the addresses it is sent to are dead
	c.mu.Lock()
	got := len(c.addrs)
	c.mu.Unlock()
	if got > maxServers {
		t.Fatalf("client keeps %d servers, limit %d", got, maxServers)
	}
}

// deadAddrFor returns a distinct loopback address that refuses
// connections at once (port 1 of 127.0.0.x).
func deadAddrFor(i int) string {
	return "127.0.0." + strconv.Itoa(2+i%200) + ":1"
}

// A pinned client stays on its server: a NOT_LEADER reply is the call's
// result, with the leader's address, and the leader sees no call.
func TestPinnedClientReturnsNotLeader(t *testing.T) {
	checkGoroutines(t)
	var leaderCalls atomic.Int64
	leader := startServer(t, HandlerFunc(func(c *Call) {
		leaderCalls.Add(1)
		c.Reply(0, nil)
	}), ServerConfig{})
	follower := startServer(t, HandlerFunc(func(c *Call) {
		c.Reply(StatusNotLeader, []byte(leader.addr))
	}), ServerConfig{})
	c := dial(t, follower.addr, ClientConfig{Pinned: true, Logger: quietLogger()})
	ctx := testCtx(t)
	for range 3 {
		st, reply, err := c.Call(ctx, 1, Cred{}, nil)
		if err != nil || st != StatusNotLeader || string(reply) != leader.addr {
			t.Fatalf("call: status %#x, reply %q, err %v; want NOT_LEADER naming %s", st, reply, err, leader.addr)
		}
	}
	if n := leaderCalls.Load(); n != 0 {
		t.Fatalf("the leader got %d calls from a pinned client", n)
	}
}
