package engine

import (
	"slices"
	"syscall"

	"github.com/canopyfs/canopy/internal/layout"
)

// Limits of one Concat.
const (
	MaxConcatSources = 10000   // S3's limit on the parts of an upload
	MaxConcatSlices  = 1 << 20 // slice placements made in the destination
)

// concatPlacement is one slice placed in a chunk of Concat's destination.
type concatPlacement struct {
	chunk uint32
	slice Slice
}

// Concat appends the data of the regular files srcs, in order, to the
// end of the regular file dst, without copying bytes: dst's chunks come to
// reference the slices the sources store, each slice then used once more
// (the engine's shared count), so that a slice is garbage only when no
// file uses it any more. The sources are left as they are. The caller
// needs write permission on dst and read permission on every source; dst
// may not be one of them (EINVAL). A source's slice placed at a shifted
// offset may fall across a chunk boundary of dst and is then placed in
// both chunks; where that would put one slice twice in one chunk of dst
// (a source whose write crossed one of its own chunk boundaries, shifted
// by an offset that brings the two pieces into one chunk), Concat answers
// EINVAL and the caller copies the bytes instead; so it does where dst
// would hold more than MaxFileInlineBytes of inline slices. mtime and ctime of dst
// become now. Nothing changes unless everything is valid.
func (e *Engine) Concat(c Cred, dst Ino, srcs []Ino, now int64) (Attr, error) {
	n, err := e.regular(dst)
	if err != nil {
		return Attr{}, err
	}
	if e.pinned(dst) || slices.ContainsFunc(srcs, e.pinned) {
		return Attr{}, syscall.EBUSY // moving to another partition
	}
	if err := e.roCheck(dst); err != nil {
		return Attr{}, err
	}
	if err := e.access(c, n, mayWrite); err != nil {
		return Attr{}, err
	}
	if len(srcs) > MaxConcatSources {
		return Attr{}, syscall.EINVAL
	}
	base := n.Size
	var place []concatPlacement
	for _, ino := range srcs {
		if ino == dst {
			return Attr{}, syscall.EINVAL
		}
		s, err := e.regular(ino)
		if err != nil {
			return Attr{}, err
		}
		if err := e.access(c, s, mayRead); err != nil {
			return Attr{}, err
		}
		if base+s.Size > MaxFileSize {
			return Attr{}, syscall.EFBIG
		}
		for _, ch := range e.chunks(s) {
			for _, sl := range ch.slices {
				place = placeShifted(place, base+chunkStart(ch.idx)+uint64(sl.Pos), sl)
			}
		}
		if len(place) > MaxConcatSlices {
			return Attr{}, syscall.EINVAL
		}
		base += s.Size
	}
	if dupInChunk(e.chunks(n), place) {
		return Attr{}, syscall.EINVAL
	}
	if len(e.inl.data) > 0 {
		inline := e.fileInlineBytes(n)
		for _, p := range place {
			inline += len(e.inl.data[p.slice.ID])
		}
		if inline > MaxFileInlineBytes {
			return Attr{}, syscall.EINVAL // the caller copies the bytes (inline.go)
		}
	}
	q, err := e.quotaGrow(n, base)
	if err != nil {
		return Attr{}, err
	}

	e.expand(n)
	defer e.st.settle(n)
	var touched []touchedChunk
	for _, p := range place {
		e.shared[p.slice.ID]++
		ch := e.chunkFor(n, p.chunk)
		if !slices.ContainsFunc(touched, func(t touchedChunk) bool { return t.idx == p.chunk }) {
			touched = append(touched, touchedChunk{idx: p.chunk, before: len(ch.slices)})
		}
		ch.slices = append(ch.slices, p.slice)
	}
	// A piece of a slice that a source's later slices cover in this chunk
	// (though not in the source's, where the slice shows elsewhere) is
	// dropped again, as Commit drops covered slices.
	for _, t := range touched {
		i, _ := e.findChunk(n, t.idx)
		if ch := &e.chunks(n)[i]; overlapsEarlier(ch.slices, t.before) {
			e.prune(ch, now)
		}
	}
	e.used += base - n.Size
	old := n.Size
	n.Size = base
	e.quotaResized(q, n, old)
	n.Mtime, n.Ctime = now, now
	if len(place) > 0 && !c.IsRoot() {
		e.killSetID(c, n, e.gid(n))
	}
	return e.attr(n), nil
}

// placeShifted appends the placements of slice s at file offset off of
// the destination, cut at its chunk boundaries.
func placeShifted(place []concatPlacement, off uint64, s Slice) []concatPlacement {
	done := uint32(0)
	for done < s.Len {
		x := off + uint64(done)
		idx := uint32(x / layout.ChunkSize)
		pos := uint32(x - chunkStart(idx))
		take := min(s.Len-done, uint32(layout.ChunkSize)-pos)
		place = append(place, concatPlacement{chunk: idx, slice: Slice{
			ID: s.ID, Size: s.Size, Off: s.Off + done, Len: take, Pos: pos,
		}})
		done += take
	}
	return place
}

// dupInChunk reports whether the placements would put a slice twice in
// one chunk, counting the chunks the destination has.
func dupInChunk(have []chunk, place []concatPlacement) bool {
	seen := make(map[[2]uint64]bool, len(place))
	for _, ch := range have {
		for _, s := range ch.slices {
			seen[[2]uint64{uint64(ch.idx), s.ID}] = true
		}
	}
	for _, p := range place {
		k := [2]uint64{uint64(p.chunk), p.slice.ID}
		if seen[k] {
			return true
		}
		seen[k] = true
	}
	return false
}
