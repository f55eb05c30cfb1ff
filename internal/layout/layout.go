// Package layout holds the constants of Canopy's file data layout that the
// metadata service and its clients must agree on: the chunk size, the
// largest object of a slice, and how a slice's objects are named in the
// object store (see docs/data.md).
//
// A file is split into chunks of ChunkSize bytes. Each write places a slice
// in a chunk; a slice's bytes are stored as objects of at most BlockSize
// bytes, object index i holding bytes [i*BlockSize, min((i+1)*BlockSize,
// size)) of the slice, named by BlockKey.
package layout

import "fmt"

const (
	// ChunkSize is the number of file bytes one chunk spans (64 MiB).
	ChunkSize = 64 << 20
	// BlockSize is the size of the largest object of a slice (4 MiB).
	BlockSize = 4 << 20
)

// BlockKey is the object key of block index of slice sliceID, whose size
// is the number of bytes in that block:
// "chunks/<id/1000000>/<id/1000>/<id>_<index>_<size>".
func BlockKey(sliceID uint64, index int, size int) string {
	return fmt.Sprintf("chunks/%d/%d/%d_%d_%d", sliceID/1000000, sliceID/1000, sliceID, index, size)
}

// Blocks returns the number of objects a slice of size bytes is stored
// in (0 for an empty slice).
func Blocks(size int) int {
	return (size + BlockSize - 1) / BlockSize
}

// BlockLen returns the size of block index of a slice of size bytes.
func BlockLen(size int, index int) int {
	n := size - index*BlockSize
	if n > BlockSize {
		n = BlockSize
	}
	if n < 0 {
		n = 0
	}
	return n
}
