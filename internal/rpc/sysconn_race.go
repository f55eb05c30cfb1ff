//go:build race

package rpc

// The race detector learns of the order that reads and writes on a
// connection create only through the syscall package's own reads and
// writes; under it, connections keep to net.Conn's.
const sysConnEnabled = false
