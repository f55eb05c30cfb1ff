package engine

import (
	"testing"
	"unsafe"
)

// A node fits the 128-byte size class of Go's allocator: fields that only
// some node types use sit behind pointers.
func TestNodeSize(t *testing.T) {
	if size := unsafe.Sizeof(node{}); size > 128 {
		t.Fatalf("node is %d bytes, more than the 128-byte size class", size)
	}
}
