package engine

import (
	"fmt"
	"maps"
	"slices"
)

// Inline slices travel in the checkpoint as an optional section after
// the user and group quotas and before the intents of renames across
// partitions, written only while there are any, so that a partition
// without them writes the bytes it wrote before they existed:
// inlineMagic, then two lists, the bytes of slices files use and those
// held for the images of committed intents (sent), each the number of
// slices, then each in id order: the id less the previous one, the length
// and the bytes. The JSON dump has the first list as an "inline" record
// with the count, then one "inline_slice" record per slice (id and data);
// it carries no intents, and so not the second.
const inlineMagic = "CNPYIL01"

// maxCkptInlineSlices bounds the inline slices of one list read from a
// checkpoint: a sanity bound, above what a partition can hold (nodes
// arriving from other partitions may take it beyond MaxInlineSlices).
const maxCkptInlineSlices = 1 << 26

func (enc *encoder) inline(data, sent map[uint64][]byte) {
	if len(data) == 0 && len(sent) == 0 {
		return
	}
	enc.raw([]byte(inlineMagic))
	enc.inlineList(data)
	enc.inlineList(sent)
}

func (enc *encoder) inlineList(data map[uint64][]byte) {
	enc.uint(uint64(len(data)))
	prev := uint64(0)
	for _, id := range slices.Sorted(maps.Keys(data)) {
		enc.uint(id - prev)
		enc.str(string(data[id]))
		prev = id
	}
}

// readInline reads the inline section into e, if the bytes that follow
// are one.
func (d *decoder) readInline(e *Engine) {
	d.inlineSlices(func(id uint64, data []byte) { e.addInline(id, data) },
		func(id uint64, data []byte) {
			if e.inl.sent == nil {
				e.inl.sent = make(map[uint64][]byte)
			}
			e.inl.sent[id] = data
		})
}

// inlineSlices reads the inline section, if the bytes that follow are
// one, calling fn for each slice of the first list and sent for each of
// the second, in id order.
func (d *decoder) inlineSlices(fn, sent func(id uint64, data []byte)) {
	if !d.next(inlineMagic) {
		return
	}
	d.bytes(len(inlineMagic))
	d.inlineList(fn)
	d.inlineList(sent)
}

func (d *decoder) inlineList(fn func(id uint64, data []byte)) {
	n := d.uint()
	if d.err == nil && n > maxCkptInlineSlices {
		d.err = fmt.Errorf("%d inline slices", n)
	}
	prev := uint64(0)
	for i := uint64(0); i < n && d.err == nil; i++ {
		delta := d.uint()
		data := []byte(d.str(MaxInlineSlice))
		if d.err == nil && (delta == 0 || len(data) == 0) {
			d.err = fmt.Errorf("inline slice %d after %d: %d bytes", prev+delta, prev, len(data))
		}
		if d.err != nil {
			return
		}
		prev += delta
		fn(prev, data)
	}
}

// jsonInline puts the "inline" and "inline_slice" records, if the
// checkpoint has the section.
func (d *decoder) jsonInline(put func(*jrec)) {
	var recs []*jrec
	d.inlineSlices(func(id uint64, data []byte) {
		recs = append(recs, &jrec{T: "inline_slice", ID: id, Data: jbytes(data)})
	}, func(uint64, []byte) {})
	if d.err != nil || len(recs) == 0 {
		return
	}
	put(&jrec{T: "inline", Count: uint64(len(recs))})
	for _, r := range recs {
		put(r)
	}
}

// jsonInlineToCheckpoint writes the inline section from rec (an "inline"
// record) and the count of "inline_slice" records next returns.
func jsonInlineToCheckpoint(rec *jrec, next func(kind string) (*jrec, error), enc *encoder) error {
	if rec.Count == 0 || rec.Count > maxCkptInlineSlices {
		return fmt.Errorf("%w: %d inline slices", ErrBadJSONDump, rec.Count)
	}
	enc.raw([]byte(inlineMagic))
	enc.uint(rec.Count)
	prev := uint64(0)
	for range rec.Count {
		s, err := next("inline_slice")
		if err != nil {
			return err
		}
		if s.ID <= prev || len(s.Data) == 0 || len(s.Data) > MaxInlineSlice {
			return fmt.Errorf("%w: inline slice %d of %d bytes after %d", ErrBadJSONDump, s.ID, len(s.Data), prev)
		}
		enc.uint(s.ID - prev)
		enc.str(string(s.Data))
		prev = s.ID
	}
	enc.uint(0) // nothing held for images: the dump has no intents
	return nil
}
