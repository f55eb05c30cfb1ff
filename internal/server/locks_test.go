package server

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/locks"
	"github.com/canopyfs/canopy/internal/rpc"
)

// The lock table's own tests are in internal/locks; these take locks
// through a real server.

// TestLocksOverRPC takes locks through two clients of a real server: they
// conflict, GETLK names the holder, a blocked SETLKW is let through by the
// unlock, and a client's locks go when its connection closes, or when it
// stops sending heartbeats.
func TestLocksOverRPC(t *testing.T) {
	srv, addr := openAndServe(t, Config{Dir: t.TempDir(), LockTimeout: 500 * time.Millisecond})
	a, b := dial(t, addr, client.Cred{}), dial(t, addr, client.Cred{})
	ctx := context.Background()
	fi, err := a.Create(ctx, "/f", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Ino()
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.WriteLock, Start: 0, End: 99, Pid: 4242}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 50, End: 50}); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("conflicting SETLK = %v, want EAGAIN", err)
	}
	l, err := b.GetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 0, End: client.LockEOF})
	if err != nil || l != (client.Lock{Type: client.WriteLock, Start: 0, End: 99, Pid: 4242}) {
		t.Fatalf("GETLK = %+v, %v; want A's write lock 0-99 of pid 4242", l, err)
	}

	// A blocked SETLKW returns once A unlocks.
	done := make(chan error, 1)
	go func() { done <- b.SetLkw(ctx, ino, 1, client.Lock{Type: client.WriteLock, Start: 10, End: 20}) }()
	waitFor(t, "SETLKW to wait in the server", func() bool {
		_, waits, _ := srv.locks.Stats()
		return waits == 1
	})
	select {
	case err := <-done:
		t.Fatalf("SETLKW returned %v while the range is held", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.Unlock, Start: 0, End: client.LockEOF}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("SETLKW after the unlock: %v", err)
	}

	// An interrupted SETLKW answers EINTR.
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- a.SetLkw(cctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 15, End: 15}) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, syscall.EINTR) {
		t.Fatalf("cancelled SETLKW = %v, want EINTR", err)
	}

	// B holds 10-20 and sends heartbeats: after several timeouts it still
	// holds them.
	time.Sleep(1500 * time.Millisecond)
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 15, End: 15}); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("lock of a client sending heartbeats was lost: SETLK = %v", err)
	}
	// B's connection closes: its locks go at once.
	b.Close()
	waitFor(t, "the departed client's lock to go", func() bool {
		return a.SetLk(ctx, ino, 1, client.Lock{Type: client.WriteLock, Start: 0, End: client.LockEOF}) == nil
	})

	// A client that holds a lock but stops sending heartbeats (a raw RPC
	// connection that stays open) loses it after the timeout.
	raw, err := rpc.Dial(addr, rpc.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.Unlock, Start: 0, End: client.LockEOF}); err != nil {
		t.Fatal(err)
	}
	if st, _, err := raw.Call(ctx, uint16(pb.Method_SETLK), rpc.Cred{}, encodeLock(uint64(ino), 1, locks.Write)); err != nil || st != 0 {
		t.Fatalf("raw SETLK: status %d, %v", st, err)
	}
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 0, End: 0}); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("raw client's lock not held: %v", err)
	}
	waitFor(t, "the silent client's lock to expire", func() bool {
		return a.SetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 0, End: 0}) == nil
	})
}

// encodeLock is a SETLK request for all of ino.
func encodeLock(ino, owner uint64, typ uint32) []byte {
	data, _ := proto.Marshal(&pb.LockRequest{Ino: ino, Owner: owner, Type: typ, End: locks.EOF})
	return data
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
