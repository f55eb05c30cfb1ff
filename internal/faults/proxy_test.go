package faults

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// bound keeps every wait in these tests finite.
const bound = 10 * time.Second

// echoServer accepts connections on 127.0.0.1 and echoes what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dialProxy(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(bound))
	return c
}

// waitUntil polls cond until it holds or the bound passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func roundTrip(t *testing.T, c net.Conn, msg []byte) {
	t.Helper()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo %q, want %q", got, msg)
	}
}

func TestProxyForwardsBothWays(t *testing.T) {
	p := startProxy(t, echoServer(t))
	c := dialProxy(t, p)
	roundTrip(t, c, []byte("hello through the proxy"))
	waitUntil(t, "23 bytes counted each way", func() bool { return p.Forwarded(Forward) == 23 && p.Forwarded(Backward) == 23 })
}

// A blocked direction holds what it read and delivers it, in order, once
// healed; the other direction is not held up by it.
func TestProxyBlocksOneWayThenHeals(t *testing.T) {
	for _, d := range []Direction{Forward, Backward} {
		t.Run(d.String(), func(t *testing.T) {
			p := startProxy(t, echoServer(t))
			c := dialProxy(t, p)
			roundTrip(t, c, []byte("before"))
			// The counters move just after each write: wait for both.
			waitUntil(t, "the counters", func() bool { return p.Forwarded(Forward) == 6 && p.Forwarded(Backward) == 6 })
			fwd, back := p.Forwarded(Forward), p.Forwarded(Backward)
			p.Block(d)
			if _, err := c.Write([]byte("during")); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the proxy to hold the message", func() bool { return p.Held(d) > 0 })
			if d == Forward && p.Forwarded(Forward) != fwd {
				t.Fatal("bytes went forward through a blocked direction")
			}
			if d == Backward {
				// It went forward and its echo is held on the way back.
				if p.Forwarded(Forward) == fwd || p.Forwarded(Backward) != back {
					t.Fatalf("forwarded %d forward and %d backward while backward was blocked",
						p.Forwarded(Forward)-fwd, p.Forwarded(Backward)-back)
				}
			}
			p.Heal()
			got := make([]byte, 6)
			if _, err := io.ReadFull(c, got); err != nil || string(got) != "during" {
				t.Fatalf("after healing: %q, %v", got, err)
			}
			roundTrip(t, c, []byte("after"))
		})
	}
}

// Reset drops the link's connections; the next dial gets a fresh one.
func TestProxyReset(t *testing.T) {
	p := startProxy(t, echoServer(t))
	c := dialProxy(t, p)
	roundTrip(t, c, []byte("x"))
	p.Reset()
	if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
		t.Fatal("read from a reset link succeeded")
	}
	roundTrip(t, dialProxy(t, p), []byte("fresh"))
}

// Closing the proxy ends blocked copiers too (Close waits for them).
func TestProxyCloseWhileBlocked(t *testing.T) {
	p := startProxy(t, echoServer(t))
	c := dialProxy(t, p)
	p.Partition()
	c.Write([]byte("stuck"))
	waitUntil(t, "held bytes", func() bool { return p.Held(Forward) > 0 })
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatal("Close hangs on a blocked link")
	}
}
