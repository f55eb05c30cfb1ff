package router

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// TestLocksReachTheInodesPartition takes file locks through the router:
// they are kept by the partition that owns the inode, conflict between
// two clients of the router and with a client of the partition itself,
// and a blocked SETLKW is let through by the unlock.
func TestLocksReachTheInodesPartition(t *testing.T) {
	f := newFixture(t)
	ctx := testCtx(t)
	other := dial(t, f.r.Addr())
	fi, err := f.c.Create(ctx, "/p1/locked", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Ino()
	if partOf(ino) != 1 {
		t.Fatalf("inode %#x not in partition 1", ino)
	}
	if err := f.c.SetLk(ctx, ino, 1, client.Lock{Type: client.WriteLock, Start: 0, End: 9, Pid: 77}); err != nil {
		t.Fatal(err)
	}
	if err := other.SetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 5, End: 5}); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("conflicting lock through the router: %v, want EAGAIN", err)
	}
	for name, c := range map[string]*client.Client{"router": other, "partition": f.direct[1]} {
		l, err := c.GetLk(ctx, ino, 2, client.Lock{Type: client.WriteLock, End: client.LockEOF})
		if err != nil || l.Type != client.WriteLock || l.Pid != 77 || l.End != 9 {
			t.Errorf("GETLK through the %s: %+v, %v; want the write lock 0-9 of pid 77", name, l, err)
		}
	}
	if _, err := f.c.Heartbeat(ctx, ino); err != nil {
		t.Fatalf("heartbeat through the router: %v", err)
	}
	if err := f.c.Flock(ctx, ino, 1, client.WriteLock, false); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- other.Flock(ctx, ino, 3, client.WriteLock, true) }()
	select {
	case err := <-done:
		t.Fatalf("blocking flock returned %v while the lock is held", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := f.c.Flock(ctx, ino, 1, client.Unlock, false); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("blocking flock after the unlock: %v", err)
	}
}
