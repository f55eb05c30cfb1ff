package engine

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"syscall"
)

// Inline slices. A small file's bytes may come with its commit instead of
// being stored as objects first (SliceWrite.Data): the commit is then the
// whole write, one log record that holds data and metadata together, and
// its durability is the log's. The engine keeps the bytes until a client
// that can reach the object store (the flusher, internal/data) has stored
// them as the slice's objects and says so (InlineStored); from then on the
// slice is like any other. Readers get the bytes with the chunk views
// until then.
//
// An inline slice is the whole content of its file when committed: the
// commit's only write, at chunk 0, pos 0, off 0, with len and size the
// bytes' length, and the file no longer than that afterwards, so every
// slice the file stored before is covered and dropped. A file therefore
// holds at most one inline slice of its own; CONCAT may give it more, up
// to MaxFileInlineBytes, which bounds what a READ_CHUNKS reply or the
// image of a file moving to another partition carries.
//
// A node sent to another partition (a rename across partitions, decided
// here) takes its inline bytes out of data into sent, where they stay,
// for the image, until the intent is forgotten; they are not flushed
// (the partition the node went to has them). Keeping the two apart means
// that a node coming back before the intent is forgotten keeps the bytes
// it arrives with.
//
// The map is owned by the apply goroutine; a freeze shares it until the
// engine next changes it (ownInline).
const (
	// MaxInlineSlice is the largest slice a commit may carry inline.
	MaxInlineSlice = 64 << 10
	// MaxInlineBytes and MaxInlineSlices bound what a partition holds
	// inline: a commit beyond them is refused with ENOBUFS (the writer
	// stores its objects itself instead). They bound the memory and the
	// copy a freeze makes of the map.
	MaxInlineBytes  = 64 << 20
	MaxInlineSlices = 16384
	// MaxListInlineBytes bounds the bytes one ListInline returns.
	MaxListInlineBytes = 4 << 20
	// MaxFileInlineBytes bounds the inline bytes one file's slices hold
	// (CONCAT refuses beyond: EINVAL, the caller copies).
	MaxFileInlineBytes = 256 << 10
)

// InlineSlice is an inline slice's id and bytes.
type InlineSlice struct {
	ID   uint64
	Data []byte
}

// inlineState is the bytes of the partition's inline slices.
type inlineState struct {
	data   map[uint64][]byte // by slice id, of slices files here use; the values are never changed in place
	bytes  int               // sum of data's lengths
	sent   map[uint64][]byte // of slices of committed intents' images (nodes sent away)
	sorted []uint64          // data's ids in order; nil when stale
	gen    uint32            // the epoch at which the maps were made the engine's own
}

// ownInline gives the engine its own maps before a change while a freeze
// shares them.
func (e *Engine) ownInline() {
	if e.inl.gen >= e.cow && e.inl.data != nil {
		return
	}
	e.inl.data = maps.Clone(e.inl.data)
	e.inl.sent = maps.Clone(e.inl.sent)
	if e.inl.data == nil {
		e.inl.data = make(map[uint64][]byte)
	}
	e.inl.gen = e.epoch
}

// sendInline moves the inline bytes of chunks' slices from data to sent:
// their node has left for another partition, whose image holds them.
func (e *Engine) sendInline(chunks []XChunk) {
	for _, ch := range chunks {
		for _, s := range ch.Slices {
			d, ok := e.inl.data[s.ID]
			if !ok || e.shared[s.ID] > 0 {
				continue
			}
			e.dropInline(s.ID)
			if e.inl.sent == nil {
				e.inl.sent = make(map[uint64][]byte)
			}
			e.inl.sent[s.ID] = d
		}
	}
}

// forgetSent drops the bytes held for an image's slices.
func (e *Engine) forgetSent(chunks []XChunk) {
	for _, ch := range chunks {
		for _, s := range ch.Slices {
			if _, ok := e.inl.sent[s.ID]; ok {
				e.ownInline()
				delete(e.inl.sent, s.ID)
			}
		}
	}
}

// fileInlineBytes returns the inline bytes of n's slices.
func (e *Engine) fileInlineBytes(n *node) int {
	if len(e.inl.data) == 0 {
		return 0
	}
	total := 0
	for _, ch := range e.chunks(n) {
		for _, s := range ch.slices {
			total += len(e.inl.data[s.ID])
		}
	}
	return total
}

// checkInlineWrite validates a commit that carries bytes inline: see the
// package comment above. size is the file's size after the commit.
func (e *Engine) checkInlineWrite(writes []SliceWrite, size uint64) error {
	w := writes[0]
	s := w.Slice
	if len(writes) != 1 || w.Chunk != 0 || s.Pos != 0 || s.Off != 0 || int(s.Len) != len(w.Data) ||
		s.Size != s.Len || len(w.Data) > MaxInlineSlice || size > uint64(s.Len) {
		return syscall.EINVAL
	}
	if e.inl.bytes+len(w.Data) > MaxInlineBytes || len(e.inl.data) >= MaxInlineSlices {
		return syscall.ENOBUFS
	}
	return nil
}

// addInline keeps data as the bytes of slice id.
func (e *Engine) addInline(id uint64, data []byte) {
	e.ownInline()
	if old, ok := e.inl.data[id]; ok {
		e.inl.bytes -= len(old)
	}
	e.inl.data[id] = data
	e.inl.bytes += len(data)
	e.inl.sorted = nil
}

// dropInline forgets the bytes of slice id, if it has any.
func (e *Engine) dropInline(id uint64) {
	old, ok := e.inl.data[id]
	if !ok {
		return
	}
	e.ownInline()
	delete(e.inl.data, id)
	e.inl.bytes -= len(old)
	e.inl.sorted = nil
}

// Inline returns the bytes of slice id if the partition holds them (its
// objects are not stored yet). They must not be changed.
func (e *Engine) Inline(id uint64) ([]byte, bool) {
	d, ok := e.inl.data[id]
	return d, ok
}

// InlineBytes returns how many bytes and slices the partition holds inline.
func (e *Engine) InlineBytes() (bytes, slices int) { return e.inl.bytes, len(e.inl.data) }

// ListInline returns, in id order, inline slices with ids greater than
// after: at most limit (0: DefaultListSlices; at most MaxListSlices) and,
// beyond the first, at most MaxListInlineBytes of bytes; eof is set when
// no more follow. The bytes must not be changed.
func (e *Engine) ListInline(after uint64, limit int) (list []InlineSlice, eof bool) {
	limit = listLimit(limit)
	if e.inl.sorted == nil {
		e.inl.sorted = slices.Sorted(maps.Keys(e.inl.data))
	}
	ids := e.inl.sorted
	i, _ := slices.BinarySearch(ids, after+1)
	size := 0
	for ; i < len(ids); i++ {
		d := e.inl.data[ids[i]]
		if len(list) == limit || len(list) > 0 && size+len(d) > MaxListInlineBytes {
			return list, false
		}
		list = append(list, InlineSlice{ID: ids[i], Data: d})
		size += len(d)
	}
	return list, true
}

// InlineStored records that the objects of the inline slices ids are
// stored durably: the partition lets go of their bytes. Ids it holds no
// bytes of (stored before, freed meanwhile, or never inline) are passed
// over.
func (e *Engine) InlineStored(ids []uint64) {
	for _, id := range ids {
		e.dropInline(id)
	}
}

// inlineOf returns the inline slices among the slices of chunks, in id
// order.
func (e *Engine) inlineOf(chunks []XChunk) []InlineSlice {
	var out []InlineSlice
	for _, ch := range chunks {
		for _, s := range ch.Slices {
			if d, ok := e.inl.data[s.ID]; ok {
				out = append(out, InlineSlice{ID: s.ID, Data: d})
			} else if d, ok := e.inl.sent[s.ID]; ok {
				out = append(out, InlineSlice{ID: s.ID, Data: d})
			}
		}
	}
	slices.SortFunc(out, func(a, b InlineSlice) int { return cmp.Compare(a.ID, b.ID) })
	return slices.CompactFunc(out, func(a, b InlineSlice) bool { return a.ID == b.ID })
}

// checkInline verifies that every inline slice is used, by a file or by
// the image of a node on its way to another partition, with the size its
// bytes say, and that the byte count is right. uses counts the files'
// uses of each slice id; sizes holds the size of each inline slice files
// use (checkData's walk gathers both).
func (e *Engine) checkInline(uses map[uint64]uint32, sizes map[uint64]uint32) error {
	if len(e.inl.data) == 0 && e.inl.bytes == 0 && len(e.inl.sent) == 0 {
		return nil
	}
	sentSizes := make(map[uint64]uint32)
	for _, in := range e.xr.list {
		if in.Image == nil {
			continue
		}
		for _, ch := range in.Image.AllChunks() {
			for _, s := range ch.Slices {
				if _, ok := e.inl.sent[s.ID]; ok {
					sentSizes[s.ID] = s.Size
				}
			}
		}
	}
	for id, d := range e.inl.sent {
		if size, ok := sentSizes[id]; !ok || int(size) != len(d) {
			return fmt.Errorf("inline slice %d held for an image: no committed intent's image holds it with %d bytes", id, len(d))
		}
	}
	total := 0
	for id, d := range e.inl.data {
		size, used := sizes[id]
		if !used {
			return fmt.Errorf("inline slice %d: used by no file here", id)
		}
		if int(size) != len(d) || len(d) == 0 || len(d) > MaxInlineSlice {
			return fmt.Errorf("inline slice %d: %d bytes for a slice of %d", id, len(d), size)
		}
		if _, garbage := e.garbage[id]; garbage && uses[id] == 0 {
			return fmt.Errorf("inline slice %d: garbage", id)
		}
		total += len(d)
	}
	if total != e.inl.bytes {
		return fmt.Errorf("inline slices hold %d bytes, %d recorded", total, e.inl.bytes)
	}
	return nil
}
