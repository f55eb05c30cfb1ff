package locks

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestGraceOnlyReclaims: after Restart, the locks held before are gone;
// for the grace period a reclaim is granted, a new lock is refused
// (SETLK EAGAIN, GETLK ErrGrace when it finds no conflict), a conflicting
// reclaim is refused as any conflicting lock, unlocking works, and a
// SETLKW parked meanwhile is granted once the period ends.
func TestGraceOnlyReclaims(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := &now
	tab := New(time.Hour, func() time.Time { return *clock })
	whole := Request{Ino: 1, Owner: ownerA1, Type: Write, Start: 0, End: EOF}
	if err := tab.Set(whole); err != nil {
		t.Fatal(err)
	}
	tab.Restart(time.Hour) // the timer will not fire during the test: the clock ends the period
	if left := tab.Grace(); left != time.Hour {
		t.Fatalf("grace left %v, want 1h", left)
	}
	if _, held := tab.Heartbeat(clientA); held != 0 {
		t.Fatalf("after Restart A holds %d, want 0", held)
	}

	other := Request{Ino: 1, Owner: ownerB1, Type: Write, Start: 0, End: EOF}
	if err := tab.Set(other); !errors.Is(err, syscall.EAGAIN) || !errors.Is(err, ErrGrace) {
		t.Fatalf("new lock during grace: %v, want ErrGrace (EAGAIN)", err)
	}
	if _, _, err := tab.Get(other); !errors.Is(err, ErrGrace) {
		t.Fatalf("GETLK during grace, nothing reclaimed: %v, want ErrGrace", err)
	}
	// A lock on another inode is refused as well: nothing tells the
	// table that nobody held it.
	if err := tab.Set(Request{Ino: 2, Owner: ownerB1, Type: Read, End: 10}); !errors.Is(err, ErrGrace) {
		t.Fatalf("new lock on another inode during grace: %v, want ErrGrace", err)
	}

	reclaim := whole
	reclaim.Reclaim = true
	if err := tab.Set(reclaim); err != nil {
		t.Fatalf("reclaim during grace: %v", err)
	}
	l, ok, err := tab.Get(other)
	if err != nil || !ok || l.Owner != ownerA1 {
		t.Fatalf("GETLK after the reclaim: %+v %v %v, want A1's lock", l, ok, err)
	}
	stolen := other
	stolen.Reclaim = true
	if err := tab.Set(stolen); !errors.Is(err, syscall.EAGAIN) || errors.Is(err, ErrGrace) {
		t.Fatalf("conflicting reclaim: %v, want plain EAGAIN", err)
	}

	got := make(chan syscall.Errno, 1)
	tab.SetWait(other, 9, time.Hour, func(e syscall.Errno) { got <- e })
	select {
	case e := <-got:
		t.Fatalf("SETLKW answered %v during grace while the lock is held", e)
	default:
	}
	unlock := whole
	unlock.Type = Unlock
	if err := tab.Set(unlock); err != nil {
		t.Fatalf("unlock during grace: %v", err)
	}
	select {
	case e := <-got:
		t.Fatalf("SETLKW answered %v during grace after the unlock", e)
	default:
	}
	*clock = now.Add(2 * time.Hour)
	tab.endGrace()
	select {
	case e := <-got:
		if e != 0 {
			t.Fatalf("SETLKW after the grace period: %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SETLKW not answered after the grace period")
	}
	if err := tab.Set(Request{Ino: 2, Owner: ownerA2, Type: Read, End: 10}); err != nil {
		t.Fatalf("new lock after the grace period: %v", err)
	}
}

// TestGraceTimerEnds: the period ends by itself on the real clock.
func TestGraceTimerEnds(t *testing.T) {
	tab := New(time.Hour, nil)
	tab.Restart(50 * time.Millisecond)
	r := Request{Ino: 1, Owner: ownerB1, Type: Write, End: EOF}
	if err := tab.Set(r); !errors.Is(err, ErrGrace) {
		t.Fatalf("during grace: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for tab.Set(r) != nil {
		if time.Now().After(deadline) {
			t.Fatal("grace period never ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	tab.Restart(0)
	if err := tab.Set(r); err != nil {
		t.Fatalf("after Restart(0): %v", err)
	}
}
