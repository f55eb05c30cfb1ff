package locks

import (
	"slices"
	"testing"
	"time"
)

// Locks lists a client's locks as requests that take them again: taken
// again in a fresh table, they make the same locks.
func TestLockTableLocks(t *testing.T) {
	tab := New(time.Minute, nil)
	for _, r := range []Request{
		{Ino: 9, Owner: ownerA1, Type: Write, Start: 0, End: 99},
		{Ino: 9, Owner: ownerA1, Type: Unlock, Start: 10, End: 19}, // splits it
		{Ino: 9, Owner: ownerA2, Type: Read, Start: 200, End: EOF},
		{Ino: 3, Owner: ownerA1, Type: Write, Flock: true},
		{Ino: 3, Owner: ownerB1, Type: Write, Start: 5, End: 5},
	} {
		if err := tab.Set(r); err != nil {
			t.Fatalf("set %+v: %v", r, err)
		}
	}
	got := tab.Locks(clientA)
	if len(got) != 4 || got[0].Ino != 3 || !got[0].Flock || got[1].Start != 0 || got[1].End != 9 ||
		got[2].Start != 20 || got[2].End != 99 || got[3].Owner != ownerA2 {
		t.Fatalf("locks of A: %+v", got)
	}
	again := New(time.Minute, nil)
	for _, r := range got {
		if err := again.Set(r); err != nil {
			t.Fatalf("take again %+v: %v", r, err)
		}
	}
	if back := again.Locks(clientA); !slices.Equal(back, got) {
		t.Fatalf("taken again: %+v, want %+v", back, got)
	}
	if _, held := again.Heartbeat(clientA); held != len(got) {
		t.Fatalf("held after taking again: %d, want %d", held, len(got))
	}
	if l := tab.Locks(ClientID{9}); l != nil {
		t.Fatalf("locks of a client with none: %+v", l)
	}
}
