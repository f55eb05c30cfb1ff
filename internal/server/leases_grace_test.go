package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// TestLockGraceAfterFailover: in a group of three replicas, client A holds
// a write lock and the leader is stopped. Client B tries the lock from the
// moment the new leader is elected: it must not get it (the new leader's
// table starts empty, but its grace period grants only reclaims) while A
// takes it again at its next heartbeat; A is not told it lost the lock.
// Once A lets it go, B gets it.
func TestLockGraceAfterFailover(t *testing.T) {
	const timeout = 4 * time.Second // grace: 2 s; A's heartbeats: every 1.33 s
	g := newGroupOf(&group{t: t, srvs: make([]*Server, 3), locks: timeout})
	lead := g.leader()
	var addrs []string
	for _, p := range g.peers {
		addrs = append(addrs, p.Addr)
	}
	all := strings.Join(addrs, ",")
	var lost atomic.Int64
	a, err := client.Dial(all, client.Options{Cred: &client.Cred{}, OnLocksLost: func(client.Ino) { lost.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := client.Dial(all, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fi, err := a.Create(ctx, "/locked", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Ino()
	whole := client.Lock{Type: client.WriteLock, End: client.LockEOF, Pid: 42}
	if err := a.SetLk(ctx, ino, 1, whole); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLk(ctx, ino, 2, whole); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("B's lock while A holds it: %v, want EAGAIN", err)
	}

	g.stop(lead)
	next := g.leader()
	refusedUntilReclaimed(t, ctx, b, ino, whole, timeout, fmt.Sprintf("replica %d was elected", next+1))
	if n := lost.Load(); n != 0 {
		t.Fatalf("A was told %d times it lost its lock", n)
	}
	unlockThenTaken(t, ctx, a, b, ino, whole, timeout)
}

// TestLockGraceAfterRestart: a single server holding client A's write
// lock is stopped and started again on the same directory and address.
// Client B, trying the lock from the moment the server is back, must not
// get it before A has taken it again, and A is not told it lost it.
func TestLockGraceAfterRestart(t *testing.T) {
	const timeout = 4 * time.Second // grace: 2 s; A's heartbeats: every 1.33 s
	cfg := Config{Dir: t.TempDir(), LockTimeout: timeout, Logger: slog.New(slog.DiscardHandler)}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go s.Serve(ln)
	var lost atomic.Int64
	a, err := client.Dial(addr, client.Options{Cred: &client.Cred{}, OnLocksLost: func(client.Ino) { lost.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := dial(t, addr, client.Cred{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fi, err := a.Create(ctx, "/locked", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Ino()
	whole := client.Lock{Type: client.WriteLock, End: client.LockEOF, Pid: 42}
	if err := a.SetLk(ctx, ino, 1, whole); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ln, err = net.Listen("tcp", addr); err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	refusedUntilReclaimed(t, ctx, b, ino, whole, timeout, "the server started again")
	if n := lost.Load(); n != 0 {
		t.Fatalf("A was told %d times it lost its lock", n)
	}
	unlockThenTaken(t, ctx, a, b, ino, whole, timeout)
}

// refusedUntilReclaimed has b try, from now on, the lock a held before
// the table started again (after what): b must never get it before the
// table knows a's lock again, nor for half a timeout after.
func refusedUntilReclaimed(t *testing.T, ctx context.Context, b *client.Client, ino client.Ino, whole client.Lock, timeout time.Duration, what string) {
	t.Helper()
	since := time.Now()
	var reclaimed time.Duration
	for deadline := since.Add(3 * timeout); ; {
		err := b.SetLk(ctx, ino, 2, whole)
		if err == nil {
			t.Fatalf("B got the lock %v after %s, before A reclaimed it", time.Since(since), what)
		}
		if !errors.Is(err, syscall.EAGAIN) {
			t.Fatalf("B's lock after %s: %v", what, err)
		}
		if reclaimed == 0 {
			if l, err := b.GetLk(ctx, ino, 2, whole); err == nil && l.Type == client.WriteLock && l.Pid == 42 {
				reclaimed = time.Since(since)
				t.Logf("A's lock reclaimed %v after %s", reclaimed.Round(time.Millisecond), what)
			}
		} else if time.Since(since) > reclaimed+timeout/2 {
			return // past the grace period: B is refused because A holds it
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's lock not reclaimed %v after %s", time.Since(since), what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unlockThenTaken has a let the lock go and b then take it.
func unlockThenTaken(t *testing.T, ctx context.Context, a, b *client.Client, ino client.Ino, whole client.Lock, timeout time.Duration) {
	t.Helper()
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.Unlock, End: client.LockEOF}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * timeout)
	for {
		err := b.SetLk(ctx, ino, 2, whole)
		if err == nil {
			return
		}
		if !errors.Is(err, syscall.EAGAIN) || time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("B's lock after A let it go: %w", err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
