package engine

import (
	"fmt"

	"github.com/canopyfs/canopy/internal/layout"
)

// checkData verifies the data path's invariants:
//   - only regular files have chunks; chunks are sorted by index, none
//     empty;
//   - every stored slice has an id of this partition below the allocator's
//     next, Len > 0, Off+Len <= Size, lies within its chunk and within the
//     file's size, appears once in its chunk's list, and shows somewhere in
//     the chunk (wholly covered slices are dropped);
//   - an id used by k chunks has k-1 extra uses recorded, and no other id
//     has any;
//   - garbage ids were handed out and no chunk uses them;
//   - pending batches are sorted, disjoint, below next, with their unused
//     count right, and no chunk or garbage entry holds an unused id;
//   - the orphan set is exactly the regular files with no links;
//   - inline slices are used and hold as many bytes as their size
//     (checkInline).
func (e *Engine) checkData() error {
	next := e.NextSliceID()
	uses := make(map[uint64]uint32)
	inlineSizes := make(map[uint64]uint32) // of the inline slices files use
	anyInline := len(e.inl.data) > 0
	for ino, n := range e.st.all() {
		if n.Nlink == 0 {
			if _, ok := e.orphans[ino]; !ok {
				return fmt.Errorf("node %d has no links but is not an orphan", ino)
			}
		}
		if x := e.st.extraOf(n); x != nil && x.file != nil && len(x.file.chunks) == 0 {
			return fmt.Errorf("node %d: file data without chunks", ino)
		}
		if len(e.chunks(n)) > 0 && n.Mode&S_IFMT != S_IFREG {
			return fmt.Errorf("node %d is not a regular file but has chunks", ino)
		}
		for i, ch := range e.chunks(n) {
			if i > 0 && e.chunks(n)[i-1].idx >= ch.idx {
				return fmt.Errorf("node %d: chunks out of order at %d", ino, ch.idx)
			}
			if len(ch.slices) == 0 {
				return fmt.Errorf("node %d chunk %d: no slices", ino, ch.idx)
			}
			view := resolve(ch.slices, layout.ChunkSize)
			for k, s := range ch.slices {
				where := fmt.Sprintf("node %d chunk %d slice %d", ino, ch.idx, s.ID)
				// A slice of another partition came with a file that moved
				// here (xrename.go); this partition holds it now.
				if s.ID == 0 || Ino(s.ID).Partition() == e.part && s.ID >= next {
					return fmt.Errorf("%s: id outside the allocated range (next %d)", where, next)
				}
				if checkPlacement(s) != nil {
					return fmt.Errorf("%s: bad placement off %d len %d pos %d size %d", where, s.Off, s.Len, s.Pos, s.Size)
				}
				if end := chunkStart(ch.idx) + uint64(s.Pos+s.Len); end > n.Size {
					return fmt.Errorf("%s: ends at %d, past the file size %d", where, end, n.Size)
				}
				for _, t := range ch.slices[:k] {
					if t.ID == s.ID {
						return fmt.Errorf("%s: twice in one chunk", where)
					}
				}
				if !visible(view, s.ID) {
					return fmt.Errorf("%s: wholly covered but kept", where)
				}
				if e.pendingBatch(s.ID) != nil {
					return fmt.Errorf("%s: used but still pending", where)
				}
				uses[s.ID]++
				if _, ok := e.inl.data[s.ID]; anyInline && ok {
					inlineSizes[s.ID] = s.Size
				}
			}
		}
	}
	for ino := range e.orphans {
		n := e.st.peek(ino)
		if n == nil || n.Nlink != 0 || n.Mode&S_IFMT != S_IFREG {
			return fmt.Errorf("orphan %d is not a regular file without links", ino)
		}
	}
	for id, k := range uses {
		if e.shared[id] != k-1 {
			return fmt.Errorf("slice %d: used %d times, %d extra uses recorded", id, k, e.shared[id])
		}
	}
	for id := range e.shared {
		if uses[id] == 0 {
			return fmt.Errorf("slice %d: extra uses recorded but unused", id)
		}
	}
	for id := range e.garbage {
		if uses[id] > 0 {
			return fmt.Errorf("slice %d: garbage but used", id)
		}
		if id == 0 || Ino(id).Partition() == e.part && id >= next {
			return fmt.Errorf("garbage slice %d outside the allocated range (next %d)", id, next)
		}
		if e.pendingBatch(id) != nil {
			return fmt.Errorf("garbage slice %d still pending", id)
		}
	}
	if err := e.checkInline(uses, inlineSizes); err != nil {
		return err
	}
	if len(e.pending) > maxPendingBatches {
		return fmt.Errorf("%d pending slice batches", len(e.pending))
	}
	for i, b := range e.pending {
		if b.count == 0 || b.count > MaxAllocSlices || b.first == 0 || b.first+uint64(b.count) > next ||
			Ino(b.first).Partition() != e.part || len(b.used) != int(b.count+63)/64 {
			return fmt.Errorf("pending batch %d+%d malformed (next %d)", b.first, b.count, next)
		}
		if i > 0 && e.pending[i-1].first+uint64(e.pending[i-1].count) > b.first {
			return fmt.Errorf("pending batches overlap at %d", b.first)
		}
		left := uint32(0)
		for k := uint64(0); k < uint64(b.count); k++ {
			if !b.isUsed(b.first + k) {
				left++
			}
		}
		if left != b.left || left == 0 {
			return fmt.Errorf("pending batch %d: %d unused, recorded %d", b.first, left, b.left)
		}
	}
	return nil
}
