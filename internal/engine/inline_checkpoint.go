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
// inlineMagic, the number of slices, then each in id order: the id less
// the previous one, the length and the bytes. The JSON dump has them as
// an "inline" record with the count, then one "inline_slice" record per
// slice (id and data).
const inlineMagic = "CNPYIL01"

func (enc *encoder) inline(data map[uint64][]byte) {
	if len(data) == 0 {
		return
	}
	enc.raw([]byte(inlineMagic))
	enc.uint(uint64(len(data)))
	prev := uint64(0)
	for _, id := range slices.Sorted(maps.Keys(data)) {
		d := data[id]
		enc.uint(id - prev)
		enc.str(string(d))
		prev = id
	}
}

// readInline reads the inline section into e, if the bytes that follow
// are one.
func (d *decoder) readInline(e *Engine) {
	d.inlineSlices(func(id uint64, data []byte) { e.addInline(id, data) })
}

// inlineSlices reads the inline section, if the bytes that follow are
// one, calling fn for each slice in id order.
func (d *decoder) inlineSlices(fn func(id uint64, data []byte)) {
	if !d.next(inlineMagic) {
		return
	}
	d.bytes(len(inlineMagic))
	n := d.uint()
	if d.err == nil && (n == 0 || n > MaxInlineSlices+maxIntents) {
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
	})
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
	if rec.Count == 0 || rec.Count > MaxInlineSlices+maxIntents {
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
	return nil
}
