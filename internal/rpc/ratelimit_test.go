package rpc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// With a burst of N, the first N calls go at once; the next, whose token
// would come long after its deadline, fails at once without being sent.
func TestRateLimitBurst(t *testing.T) {
	checkGoroutines(t)
	var served atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) { served.Add(1); c.Reply(StatusOK, nil) }), ServerConfig{})
	const burst = 3
	cl := dial(t, srv.addr, ClientConfig{RateLimit: 1e-3, RateBurst: burst}) // a token every 1000 s
	for i := range burst {
		if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
			t.Fatalf("call %d of the burst: %v", i+1, err)
		}
	}
	if tokens := cl.limiter.Tokens(); tokens >= 1 {
		t.Fatalf("%v tokens left after the burst, want less than 1", tokens)
	}
	_, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("call beyond the burst: %v, want ErrTimeout", err)
	}
	if n := served.Load(); n != burst {
		t.Fatalf("server saw %d calls, want %d", n, burst)
	}
	// The refused call did not take the next token.
	if tokens := cl.limiter.Tokens(); tokens < 0 {
		t.Fatalf("%v tokens after a refused call: its reservation was kept", tokens)
	}
}

// Every attempt takes a token: a call retried twice takes three.
func TestRateLimitCountsRetries(t *testing.T) {
	checkGoroutines(t)
	var tries atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) {
		if tries.Add(1) <= 2 {
			c.Reply(StatusBusy, nil)
			return
		}
		c.Reply(StatusOK, nil)
	}), ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{RateLimit: 1e-3, RateBurst: 3})
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); !errors.Is(err, ErrTimeout) {
		t.Fatalf("call after three attempts used the burst: %v, want ErrTimeout", err)
	}
	if n := tries.Load(); n != 3 {
		t.Fatalf("server saw %d attempts, want 3", n)
	}
}

// A call waiting for a token gives up when its context is cancelled, and
// hands its reservation back.
func TestRateLimitWaitCancelled(t *testing.T) {
	checkGoroutines(t)
	var served atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) { served.Add(1); c.Reply(StatusOK, nil) }), ServerConfig{})
	// A token every 10 s, well within the call's deadline: the second
	// call waits for it.
	cl := dial(t, srv.addr, ClientConfig{RateLimit: 0.1, RateBurst: 1, OpTimeout: 1 << 40})
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, _, err := cl.Call(ctx, 1, Cred{}, nil)
		done <- err
	}()
	// A reservation beyond the bucket's content shows as negative tokens.
	waitFor(t, "the call to wait for a token", func() bool { return cl.limiter.Tokens() < 0 })
	cancel()
	if err := recv(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, want context.Canceled", err)
	}
	if tokens := cl.limiter.Tokens(); tokens < 0 {
		t.Fatalf("%v tokens after the cancelled wait: its reservation was kept", tokens)
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("server saw %d calls, want 1", n)
	}
}

// Calls that wait briefly for their tokens all go through.
func TestRateLimitWaits(t *testing.T) {
	checkGoroutines(t)
	var served atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) { served.Add(1); c.Reply(StatusOK, nil) }), ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{RateLimit: 2000, RateBurst: 1})
	const calls = 10
	for range calls {
		if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := served.Load(); n != calls {
		t.Fatalf("server saw %d calls, want %d", n, calls)
	}
}

func TestRateBurstDefault(t *testing.T) {
	for _, tc := range []struct {
		limit float64
		burst int
	}{{0.5, 1}, {10, 1}, {1000, 100}} {
		cfg := ClientConfig{RateLimit: tc.limit}
		if err := cfg.setDefaults(); err != nil {
			t.Fatal(err)
		}
		if cfg.RateBurst != tc.burst {
			t.Errorf("RateLimit %v: default burst %d, want %d", tc.limit, cfg.RateBurst, tc.burst)
		}
	}
}
