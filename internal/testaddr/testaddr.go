// Package testaddr hands tests loopback addresses for servers that must
// listen again on the same address after a restart (a replica's client or
// Raft port), where a port from port 0 would not do: closed, it is soon
// taken by an outgoing connection or another listener on port 0.
package testaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// Ports are taken from below the kernel's ephemeral range (32768 on),
// which neither outgoing connections nor listeners on port 0 use.
const (
	lowPort  = 10000
	highPort = 32000
)

var (
	mu   sync.Mutex
	used = map[int]bool{} // ports handed out by this process, never twice
)

// Free returns a loopback address whose port was free a moment ago and
// that no earlier call of this process returned.
func Free(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		port := lowPort + rand.IntN(highPort-lowPort)
		if used[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		used[port] = true
		return ln.Addr().String()
	}
	t.Fatal("no free loopback port")
	return ""
}
