package testaddr

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeNeverTwice: addresses are on loopback, below the ephemeral
// range, listenable, and never handed out twice.
func TestFreeNeverTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		a := Free(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("address %q: %v", a, err)
		}
		if p, _ := strconv.Atoi(port); p < lowPort || p >= highPort {
			t.Fatalf("port %d outside [%d, %d)", p, lowPort, highPort)
		}
	}
	ln, err := net.Listen("tcp", Free(t))
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}
