package engine

import (
	"bytes"
	"slices"
	"sort"
	"syscall"

	"github.com/canopyfs/canopy/internal/layout"
)

// chunk is the slices stored for one chunk of a regular file, in the order
// they were placed: a later slice covers earlier ones where they overlap.
// Invariants (see checkData): every slice has a non-zero id that appears
// once in the list, Len > 0, lies within the chunk and the file's size, and
// is visible somewhere (slices wholly covered by later ones are dropped).
//
// A file keeps its chunks, sorted by index, in its extra record's fileData;
// a file whose data is one slice and that has nothing else keeps that
// slice in a single instead (store.go), and a file without data has
// neither.
type chunk struct {
	idx    uint32
	slices []Slice
}

// fileData is the layout of a regular file that has data.
type fileData struct {
	chunks []chunk
}

// chunks returns n's chunks, sorted by index. For a file in the compact
// one-slice form (see single) it builds them: the result is for reading,
// and a caller that changes chunks calls expand first.
func (e *Engine) chunks(n *node) []chunk {
	if one := e.st.singleOf(n); one != nil {
		return []chunk{{idx: one.chunk, slices: []Slice{one.slice}}}
	}
	if x := e.st.extraOf(n); x != nil && x.file != nil {
		return x.file.chunks
	}
	return nil
}

// hasData reports whether n has chunks, without building them.
func (e *Engine) hasData(n *node) bool {
	if e.st.singleOf(n) != nil {
		return true
	}
	x := e.st.extraOf(n)
	return x != nil && x.file != nil && len(x.file.chunks) > 0
}

// setChunks makes cs n's chunks, dropping the fileData when it is empty
// and keeping a file of one slice in the compact form.
func (e *Engine) setChunks(n *node, cs []chunk) {
	e.st.dropSingle(n)
	if len(cs) == 0 {
		if x := e.st.extraMut(n); x != nil {
			x.file = nil
			e.st.dropExtraIfEmpty(n)
		}
		return
	}
	x := e.st.extra(n)
	if x.file == nil {
		x.file = &fileData{chunks: cs}
	} else {
		x.file.chunks = cs
	}
	e.st.settle(n)
}

// expand turns a file in the compact one-slice form into the full form, so
// that its chunks can be changed in place; settle turns it back.
func (e *Engine) expand(n *node) {
	if e.st.singleOf(n) != nil {
		e.st.extra(n) // moves the single into file data
	} else {
		e.st.extraMut(n) // the chunk lists are no longer a live freeze's
	}
}

// MaxReadChunks is the most chunks one ReadChunks returns.
const MaxReadChunks = 1024

// chunkStart returns the file offset of chunk idx.
func chunkStart(idx uint32) uint64 { return uint64(idx) * layout.ChunkSize }

// findChunk returns the position of chunk idx in n's chunks and whether it
// is there.
func (e *Engine) findChunk(n *node, idx uint32) (int, bool) {
	cs := e.chunks(n)
	i := sort.Search(len(cs), func(i int) bool { return cs[i].idx >= idx })
	return i, i < len(cs) && cs[i].idx == idx
}

// chunkFor returns chunk idx of n, adding an empty one if there is none.
// n must not be in the compact form (expand).
func (e *Engine) chunkFor(n *node, idx uint32) *chunk {
	i, ok := e.findChunk(n, idx)
	if !ok {
		cs := append(e.chunks(n), chunk{})
		copy(cs[i+1:], cs[i:])
		cs[i] = chunk{idx: idx}
		e.setChunks(n, cs)
	}
	return &e.chunks(n)[i]
}

// regular returns the regular file ino: EISDIR for a directory, EINVAL for
// any other type.
func (e *Engine) regular(ino Ino) (*node, error) {
	n, err := e.get(ino)
	if err != nil {
		return nil, err
	}
	return isRegular(n)
}

// peekRegular is regular for reading only.
func (e *Engine) peekRegular(ino Ino) (*node, error) {
	n, err := e.peek(ino)
	if err != nil {
		return nil, err
	}
	return isRegular(n)
}

// isRegular returns n if it is a regular file: EISDIR for a directory,
// EINVAL for any other type.
func isRegular(n *node) (*node, error) {
	switch n.Mode & S_IFMT {
	case S_IFREG:
		return n, nil
	case S_IFDIR:
		return nil, syscall.EISDIR
	}
	return nil, syscall.EINVAL
}

// overlay places s over view (non-overlapping, sorted by Pos), cutting
// what it covers, and returns the new view. It finds the entries s
// touches by binary search and replaces them in place, so a chunk of k
// stored slices resolves in O(k log k) plus the moves.
func overlay(view []Slice, s Slice) []Slice {
	end := s.Pos + s.Len
	i := sort.Search(len(view), func(i int) bool { return view[i].Pos+view[i].Len > s.Pos })
	j := i
	for j < len(view) && view[j].Pos < end {
		j++
	}
	var repl [3]Slice
	r := repl[:0]
	if i < j {
		if v := view[i]; v.Pos < s.Pos {
			r = append(r, Slice{ID: v.ID, Size: v.Size, Off: v.Off, Len: s.Pos - v.Pos, Pos: v.Pos})
		}
	}
	r = append(r, s)
	if i < j {
		if v := view[j-1]; v.Pos+v.Len > end {
			r = append(r, Slice{ID: v.ID, Size: v.Size, Off: v.Off + (end - v.Pos), Len: v.Pos + v.Len - end, Pos: end})
		}
	}
	return slices.Replace(view, i, j, r...)
}

// resolve returns the non-overlapping view of the stored slices ss, later
// over earlier, cut at limit: sorted by Pos, without holes.
func resolve(ss []Slice, limit uint32) []Slice {
	if len(ss) == 1 {
		s := ss[0]
		if s.Pos >= limit {
			return nil
		}
		s.Len = min(s.Len, limit-s.Pos)
		return []Slice{s}
	}
	view := make([]Slice, 0, len(ss)+2)
	for _, s := range ss {
		if s.Pos >= limit {
			continue
		}
		s.Len = min(s.Len, limit-s.Pos)
		view = overlay(view, s)
	}
	return view
}

// withHoles fills the gaps of view (sorted, non-overlapping, within
// [0, limit)) with holes so that it covers [0, limit) exactly.
func withHoles(view []Slice, limit uint32) []Slice {
	out := make([]Slice, 0, len(view)*2+1)
	pos := uint32(0)
	for _, v := range view {
		if v.Pos > pos {
			out = append(out, Slice{Pos: pos, Len: v.Pos - pos})
		}
		out = append(out, v)
		pos = v.Pos + v.Len
	}
	if pos < limit {
		out = append(out, Slice{Pos: pos, Len: limit - pos})
	}
	return out
}

// prune drops the slices of ch that no longer show anywhere, releasing
// their ids at time now.
func (e *Engine) prune(ch *chunk, now int64) {
	if len(ch.slices) < 2 {
		return
	}
	view := resolve(ch.slices, layout.ChunkSize)
	keep := ch.slices[:0]
	for _, s := range ch.slices {
		if visible(view, s.ID) {
			keep = append(keep, s)
		} else {
			e.unref(s, now)
		}
	}
	clear(ch.slices[len(keep):])
	ch.slices = keep
}

func visible(view []Slice, id uint64) bool {
	for _, v := range view {
		if v.ID == id {
			return true
		}
	}
	return false
}

// checkPlacement validates a slice to be placed at s.Pos of a chunk.
func checkPlacement(s Slice) error {
	if s.ID == 0 || s.Len == 0 || uint64(s.Off)+uint64(s.Len) > uint64(s.Size) ||
		uint64(s.Pos)+uint64(s.Len) > layout.ChunkSize {
		return syscall.EINVAL
	}
	return nil
}

// Commit records slices whose data is stored, in order (a later slice
// covers earlier ones where they overlap), and makes the file at least size
// bytes long and long enough to hold them. Like a write through an open
// file descriptor it checks no permission: access is checked by Open (a
// file opened for writing stays writable through that descriptor whatever
// its mode becomes). Each slice id must have been handed out by AllocSlices and
// not used yet (EINVAL otherwise); one commit may place the same id again
// only in another chunk and with the same Size (a write that crosses a
// chunk boundary, stored as one slice). mtime sets the file's mtime (0:
// now); ctime is now. Stored slices that the new ones cover entirely are
// dropped, and their ids become garbage at now unless still used elsewhere.
// At most MaxCommitWrites slices per commit (EINVAL). A write may carry
// its bytes inline (inline.go: EINVAL unless it is the file's whole
// content, ENOBUFS when the partition holds as much inline as it may).
// Nothing changes unless everything is valid.
func (e *Engine) Commit(c Cred, ino Ino, writes []SliceWrite, size uint64, mtime, now int64) (Attr, error) {
	n, err := e.regular(ino)
	if err != nil {
		return Attr{}, err
	}
	if e.pinned(ino) {
		return Attr{}, syscall.EBUSY // moving to another partition
	}
	if err := e.roCheck(ino); err != nil {
		return Attr{}, err
	}
	if size > MaxFileSize {
		return Attr{}, syscall.EFBIG
	}
	if len(writes) > MaxCommitWrites {
		return Attr{}, syscall.EINVAL
	}
	newSize := max(n.Size, size)
	for i, w := range writes {
		s := w.Slice
		if err := checkPlacement(s); err != nil {
			return Attr{}, err
		}
		end := chunkStart(w.Chunk) + uint64(s.Pos) + uint64(s.Len)
		if end > MaxFileSize {
			return Attr{}, syscall.EFBIG
		}
		newSize = max(newSize, end)
		if j := firstUse(writes[:i], s.ID); j >= 0 {
			if writes[j].Slice.Size != s.Size || placedIn(writes[:i], s.ID, w.Chunk) {
				return Attr{}, syscall.EINVAL
			}
			continue
		}
		if e.pendingBatch(s.ID) == nil {
			return Attr{}, syscall.EINVAL
		}
	}
	inline := slices.ContainsFunc(writes, func(w SliceWrite) bool { return w.Data != nil })
	if inline {
		if err := e.checkInlineWrite(writes, newSize); err != nil {
			return Attr{}, err
		}
	}
	q, err := e.quotaGrow(n, newSize)
	if err != nil {
		return Attr{}, err
	}

	e.expand(n)
	defer e.st.settle(n)
	var touched [4]touchedChunk
	tc := touched[:0] // chunks written, with their slice counts before
	for i, w := range writes {
		if firstUse(writes[:i], w.Slice.ID) >= 0 {
			e.shared[w.Slice.ID]++
		} else {
			e.useID(w.Slice.ID)
		}
		ch := e.chunkFor(n, w.Chunk)
		if !slices.ContainsFunc(tc, func(t touchedChunk) bool { return t.idx == w.Chunk }) {
			tc = append(tc, touchedChunk{idx: w.Chunk, before: len(ch.slices)})
		}
		ch.slices = append(ch.slices, w.Slice)
	}
	for _, t := range tc {
		i, _ := e.findChunk(n, t.idx)
		if ch := &e.chunks(n)[i]; overlapsEarlier(ch.slices, t.before) {
			e.prune(ch, now)
		}
	}
	if inline {
		e.addInline(writes[0].Slice.ID, bytes.Clone(writes[0].Data))
	}
	a := n
	e.used += newSize - a.Size
	old := a.Size
	a.Size = newSize
	e.quotaResized(q, a, old)
	if mtime == 0 {
		mtime = now
	}
	a.Mtime, a.Ctime = mtime, now
	if len(writes) > 0 && !c.IsRoot() {
		e.killSetID(c, a, e.gid(a))
	}
	return e.attr(a), nil
}

// firstUse returns the index of the first write of id in ws, or -1.
func firstUse(ws []SliceWrite, id uint64) int {
	for i := range ws {
		if ws[i].Slice.ID == id {
			return i
		}
	}
	return -1
}

// placedIn reports whether ws places id in chunk idx.
func placedIn(ws []SliceWrite, id uint64, idx uint32) bool {
	for i := range ws {
		if ws[i].Slice.ID == id && ws[i].Chunk == idx {
			return true
		}
	}
	return false
}

// touchedChunk is a chunk a commit writes to and how many slices it held
// before.
type touchedChunk struct {
	idx    uint32
	before int
}

// overlapsEarlier reports whether any of ss[from:] overlaps a slice placed
// before it: only then can a slice have become wholly covered.
func overlapsEarlier(ss []Slice, from int) bool {
	for j := max(from, 1); j < len(ss); j++ {
		s := ss[j]
		for _, t := range ss[:j] {
			if t.Pos < s.Pos+s.Len && s.Pos < t.Pos+t.Len {
				return true
			}
		}
	}
	return false
}

// ReadChunks returns the attributes of the regular file ino and the views
// of count chunks from chunk first (count 0 means 1; at most
// MaxReadChunks), stopping at the end of the file. Each view covers its
// chunk from 0 to the end of the chunk or of the file, holes as ID 0. Like
// a read through an open file descriptor it checks no permission: access
// is checked by Open.
func (e *Engine) ReadChunks(ino Ino, first, count uint32) (Attr, []ChunkView, error) {
	n, err := e.peekRegular(ino)
	if err != nil {
		return Attr{}, nil, err
	}
	count = min(max(count, 1), MaxReadChunks)
	size := n.Size
	var views []ChunkView
	for k := uint32(0); k < count; k++ {
		idx := first + k
		if idx < first { // wrapped
			break
		}
		start := chunkStart(idx)
		if start >= size {
			break
		}
		limit := uint32(min(size-start, layout.ChunkSize))
		v := ChunkView{Chunk: idx}
		if i, ok := e.findChunk(n, idx); ok {
			ss := e.chunks(n)[i].slices
			v.Stored = len(ss)
			v.Slices = withHoles(resolve(ss, limit), limit)
		} else {
			v.Slices = []Slice{{Len: limit}}
		}
		views = append(views, v)
	}
	return e.attr(n), views, nil
}

// truncateData cuts n's data at size: chunks wholly beyond it go, slices
// that start at or beyond it go, and slices that cross it are shortened,
// so that growing the file later reads zeros there. Dropped ids become
// garbage at now unless still used elsewhere.
func (e *Engine) truncateData(n *node, size uint64, now int64) {
	e.expand(n)
	cs := e.chunks(n)
	keep := cs[:0]
	for _, ch := range cs {
		start := chunkStart(ch.idx)
		if start >= size {
			for _, s := range ch.slices {
				e.unref(s, now)
			}
			continue
		}
		if end := start + layout.ChunkSize; end > size {
			cut := uint32(size - start)
			ss := ch.slices[:0]
			for _, s := range ch.slices {
				switch {
				case s.Pos >= cut:
					e.unref(s, now)
					continue
				case s.Pos+s.Len > cut:
					s.Len = cut - s.Pos
				}
				ss = append(ss, s)
			}
			clear(ch.slices[len(ss):])
			ch.slices = ss
			if len(ch.slices) == 0 {
				continue
			}
			e.prune(&ch, now)
		}
		keep = append(keep, ch)
	}
	clear(cs[len(keep):])
	e.setChunks(n, keep)
}

// freeData releases every slice of n at time now.
func (e *Engine) freeData(n *node, now int64) {
	for _, ch := range e.chunks(n) {
		for _, s := range ch.slices {
			e.unref(s, now)
		}
	}
	e.setChunks(n, nil)
}

// Compact replaces the first len(oldIDs) stored slices of chunk idx of
// file ino by s, if they are still exactly oldIDs, in any order (EAGAIN
// otherwise: the order of the stored slices changes only by compaction,
// which changes their ids, so the set tells). s
// must be a freshly allocated slice id (EINVAL otherwise), and is cut at
// the end of the data of the slices it replaces: a truncation since the
// caller read them may have shortened them, and what lies beyond reads as
// zeros. The old ids become garbage at now unless still used elsewhere.
// Compaction does not change the file's content, so it checks no
// permission and leaves the times alone.
func (e *Engine) Compact(ino Ino, idx uint32, oldIDs []uint64, s Slice, now int64) error {
	n, err := e.regular(ino)
	if err != nil {
		return err
	}
	if e.pinned(ino) {
		return syscall.EBUSY // moving to another partition
	}
	if len(oldIDs) == 0 {
		return syscall.EINVAL
	}
	if err := checkPlacement(s); err != nil {
		return err
	}
	if e.pendingBatch(s.ID) == nil {
		return syscall.EINVAL
	}
	e.expand(n)
	defer e.st.settle(n)
	i, ok := e.findChunk(n, idx)
	if !ok {
		return syscall.EAGAIN
	}
	ch := &e.chunks(n)[i]
	if len(ch.slices) < len(oldIDs) {
		return syscall.EAGAIN
	}
	var end uint32
	for _, old := range ch.slices[:len(oldIDs)] {
		if !slices.Contains(oldIDs, old.ID) {
			return syscall.EAGAIN
		}
		end = max(end, old.Pos+old.Len)
	}
	if s.Pos >= end {
		return syscall.EAGAIN
	}
	s.Len = min(s.Len, end-s.Pos)

	e.useID(s.ID)
	for _, old := range ch.slices[:len(oldIDs)] {
		e.unref(old, now)
	}
	rest := len(ch.slices) - len(oldIDs)
	ss := make([]Slice, 0, 1+rest)
	ss = append(ss, s)
	ss = append(ss, ch.slices[len(oldIDs):]...)
	ch.slices = ss
	e.prune(ch, now)
	return nil
}
