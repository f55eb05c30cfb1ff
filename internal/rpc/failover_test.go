package rpc

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
)

// named answers every call with its name.
func named(name string) Handler {
	return HandlerFunc(func(c *Call) { c.Reply(0, []byte(name)) })
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestDialAnyMovesToTheNextServer(t *testing.T) {
	checkGoroutines(t)
	a := startServer(t, named("a"), ServerConfig{})
	b := startServer(t, named("b"), ServerConfig{})
	c, err := DialAny([]string{deadAddr(t), a.addr, b.addr}, ClientConfig{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	call := func() string {
		st, reply, err := c.Call(ctx, 1, Cred{}, nil)
		if err != nil || st != 0 {
			t.Fatalf("call: status %d, err %v", st, err)
		}
		return string(reply)
	}
	if got := call(); got != "a" {
		t.Fatalf("first call answered by %q, want a (the first live server)", got)
	}

	// Calls in flight while a goes away end on b, without an error.
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				got := call()
				mu.Lock()
				seen[got]++
				mu.Unlock()
			}
		}()
	}
	a.Close()
	wg.Wait()
	if seen["b"] == 0 {
		t.Fatalf("no call reached b after a closed: %v", seen)
	}
	if got := call(); got != "b" {
		t.Fatalf("after a closed, answered by %q", got)
	}
}

func TestDialAnyReportsEveryFailure(t *testing.T) {
	_, err := DialAny([]string{deadAddr(t), deadAddr(t)}, ClientConfig{Logger: quietLogger()})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("DialAny of two dead addresses: %v, want ECONNREFUSED", err)
	}
	if _, err := DialAny(nil, ClientConfig{}); err == nil {
		t.Fatal("DialAny with no address succeeded")
	}
}
