package server

import (
	"context"
	"errors"
	"fmt"
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
	elected := time.Now()
	// From the election on, B keeps trying until the new leader knows
	// A's lock (A reclaimed it) and a while after.
	var reclaimed time.Duration
	for deadline := elected.Add(3 * timeout); ; {
		err := b.SetLk(ctx, ino, 2, whole)
		if err == nil {
			t.Fatalf("B got the lock %v after replica %d was elected, before A reclaimed it", time.Since(elected), next+1)
		}
		if !errors.Is(err, syscall.EAGAIN) {
			t.Fatalf("B's lock after the failover: %v", err)
		}
		if reclaimed == 0 {
			if l, err := b.GetLk(ctx, ino, 2, whole); err == nil && l.Type == client.WriteLock && l.Pid == 42 {
				reclaimed = time.Since(elected)
				t.Logf("A's lock reclaimed %v after the election", reclaimed.Round(time.Millisecond))
			}
		} else if time.Since(elected) > reclaimed+timeout/2 {
			break // past the grace period: B is refused because A holds it
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's lock not reclaimed %v after the failover", time.Since(elected))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := lost.Load(); n != 0 {
		t.Fatalf("A was told %d times it lost its lock", n)
	}
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.Unlock, End: client.LockEOF}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * timeout)
	for {
		err := b.SetLk(ctx, ino, 2, whole)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EAGAIN) || time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("B's lock after A let it go: %w", err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
