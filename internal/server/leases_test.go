package server

import (
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// A lease is renewed by touch, given by adopt only to a client without
// one, and expires once, when the client was last heard before the
// cutoff.
func TestLeaseTable(t *testing.T) {
	l := newLeaseTable()
	t0 := time.Unix(1000, 0)
	a, b, c := rpc.ClientID{1}, rpc.ClientID{2}, rpc.ClientID{3}
	l.touch(a, t0, a)
	l.touch(b, t0, b)
	l.touch(b, t0.Add(5*time.Second), b) // renewed
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
	l.touch(a, t0, a)
	l.reset()
	if got := l.expired(t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("expired after reset: %v", got)
	}
}

// A client is elsewhere, for a router ending its session, when it was
// last heard recently through a connection of another router; not when
// it was last heard through that router (another of its connections
// too), directly, long ago, or never.
func TestLeaseElsewhere(t *testing.T) {
	l := newLeaseTable()
	t0 := time.Unix(1000, 0)
	routerA, routerB := rpc.ClientID{0xa, 0xa}, rpc.ClientID{0xb, 0xb}
	connA1 := protocol.RouterConnID(routerA, rpc.ClientID{15: 1})
	connA2 := protocol.RouterConnID(routerA, rpc.ClientID{15: 2})
	connB := protocol.RouterConnID(routerB, rpc.ClientID{15: 3})
	x, y, z := rpc.ClientID{1}, rpc.ClientID{2}, rpc.ClientID{3}
	l.touch(x, t0, connA1)
	l.touch(y, t0, connA1)
	l.touch(y, t0.Add(time.Second), connB) // y moved to B
	l.touch(z, t0, z)                      // direct
	cutoff := t0.Add(-time.Minute)
	if l.elsewhere(x, connA2, cutoff) {
		t.Error("x, heard through A only, is elsewhere for A")
	}
	if !l.elsewhere(y, connA2, cutoff) {
		t.Error("y, heard through B last, is not elsewhere for A")
	}
	if l.elsewhere(y, connB, cutoff) {
		t.Error("y is elsewhere for B, the router it is heard through")
	}
	if l.elsewhere(y, connA1, t0.Add(time.Hour)) {
		t.Error("y, heard through B long before the cutoff, is elsewhere")
	}
	if l.elsewhere(z, connA1, cutoff) || l.elsewhere(rpc.ClientID{9}, connA1, cutoff) {
		t.Error("a direct client or an unknown one is elsewhere")
	}
}
