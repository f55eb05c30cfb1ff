package server

import (
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/rpc"
)

// A lease is renewed by touch, given by adopt only to a client without
// one, and expires once, when the client was last heard before the
// cutoff.
func TestLeaseTable(t *testing.T) {
	l := newLeaseTable()
	t0 := time.Unix(1000, 0)
	a, b, c := rpc.ClientID{1}, rpc.ClientID{2}, rpc.ClientID{3}
	l.touch(a, t0)
	l.touch(b, t0)
	l.touch(b, t0.Add(5*time.Second)) // renewed
	l.adopt([]rpc.ClientID{a, c}, t0.Add(4*time.Second))
	got := l.expired(t0.Add(3 * time.Second))
	if len(got) != 1 || got[0] != a {
		t.Fatalf("expired: %v, want only a", got)
	}
	if got := l.expired(t0.Add(3 * time.Second)); len(got) != 0 {
		t.Fatalf("expired twice: %v", got)
	}
	l.drop(c)
	if got := l.expired(t0.Add(time.Hour)); len(got) != 1 || got[0] != b {
		t.Fatalf("expired after drop: %v, want only b", got)
	}
	l.touch(a, t0)
	l.reset()
	if got := l.expired(t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("expired after reset: %v", got)
	}
}
