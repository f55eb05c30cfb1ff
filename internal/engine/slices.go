package engine

import (
	"sort"
	"syscall"

	"github.com/canopyfs/canopy/internal/layout"
)

// Slice is a run of bytes placed in a chunk: Len bytes starting at byte Off
// of slice ID's data, at byte Pos of the chunk. ID 0 is a hole (zeros).
// Size is the number of bytes stored for slice ID.
type Slice struct {
	ID   uint64
	Size uint32
	Off  uint32
	Len  uint32
	Pos  uint32
}

// SliceWrite places a slice in chunk Chunk of a file.
type SliceWrite struct {
	Chunk uint32
	Slice Slice
	Data  []byte // the slice's bytes, inline (inline.go); nil: stored as objects
}

// ChunkView is what a reader of one chunk needs: non-overlapping slices
// sorted by Pos, holes as ID 0, from 0 to the end of the chunk or of the
// file, whichever comes first. Stored is the number of slices the chunk
// keeps; many means the chunk is fragmented.
type ChunkView struct {
	Chunk  uint32
	Slices []Slice
	Stored int
}

// Limits of the data path.
const (
	// MaxAllocSlices is the most slice ids one AllocSlices hands out.
	MaxAllocSlices = 4096
	// MaxCommitWrites is the most slices one Commit places.
	MaxCommitWrites = 4096
	// MaxFileSize is the largest file size: 2^32 chunks.
	MaxFileSize = uint64(layout.ChunkSize) << 32
	// maxPendingBatches bounds the batches of allocated, not yet used
	// slice ids the engine remembers; beyond it the oldest batch is
	// forgotten and its unused ids can no longer be committed.
	maxPendingBatches = 16384
)

// MakeSliceID returns the slice id with local number n in partition p.
// Like inode numbers, slice ids carry their partition in the high bits.
func MakeSliceID(p uint16, n uint64) uint64 { return uint64(MakeIno(p, n)) }

// localID returns the partition-local counter of a slice id.
func localID(id uint64) uint64 { return id & (1<<localBits - 1) }

// allocBatch is one AllocSlices result whose ids are not all used yet.
// used has a bit per id of the batch, set once the id is committed.
type allocBatch struct {
	first uint64 // first slice id of the batch
	count uint32
	left  uint32 // ids not used yet
	used  []uint64
}

func (b *allocBatch) isUsed(id uint64) bool {
	i := id - b.first
	return b.used[i/64]&(1<<(i%64)) != 0
}

// AllocSlices reserves count new slice ids (at most MaxAllocSlices; a
// larger count is cut to that) and returns the first; the ids first ..
// first+n-1 may each be committed once, by Commit or Compact. ino names any
// node of the partition (ENOENT if there is none); count 0 is EINVAL.
func (e *Engine) AllocSlices(ino Ino, count uint32) (first uint64, n uint32, err error) {
	if _, err := e.peek(ino); err != nil {
		return 0, 0, err
	}
	if count == 0 {
		return 0, 0, syscall.EINVAL
	}
	n = min(count, MaxAllocSlices)
	if e.nextSlice+uint64(n) >= 1<<localBits {
		return 0, 0, syscall.ENOSPC
	}
	first = MakeSliceID(e.part, e.nextSlice)
	e.nextSlice += uint64(n)
	e.ownPending()
	if len(e.pending) >= maxPendingBatches {
		e.pending = append(e.pending[:0], e.pending[1:]...)
	}
	e.pending = append(e.pending, &allocBatch{
		first: first, count: n, left: n, used: make([]uint64, (n+63)/64),
	})
	return first, n, nil
}

// pendingBatch returns the batch that holds the unused id, or nil if id
// was never handed out, was used already, or was forgotten.
func (e *Engine) pendingBatch(id uint64) *allocBatch {
	i := sort.Search(len(e.pending), func(i int) bool {
		b := e.pending[i]
		return b.first+uint64(b.count) > id
	})
	if i == len(e.pending) {
		return nil
	}
	b := e.pending[i]
	if id < b.first || b.isUsed(id) {
		return nil
	}
	return b
}

// useID marks the pending id used, dropping its batch once every id of it
// is.
func (e *Engine) useID(id uint64) {
	b := e.pendingBatch(id)
	if b == nil {
		return
	}
	if e.pendingGen < e.cow {
		e.ownPending()
		b = e.pendingBatch(id)
	}
	i := id - b.first
	b.used[i/64] |= 1 << (i % 64)
	b.left--
	if b.left == 0 {
		k := sort.Search(len(e.pending), func(k int) bool { return e.pending[k].first >= b.first })
		e.pending = append(e.pending[:k], e.pending[k+1:]...)
	}
}

// NextSliceID returns the id the next AllocSlices will start at: every id
// below it has been handed out.
func (e *Engine) NextSliceID() uint64 { return MakeSliceID(e.part, e.nextSlice) }
