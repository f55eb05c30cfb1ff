package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
)

// A directory's listing order (dirents.sorted) is built by its first
// paged listing and kept from then on, so that a page costs what it lists
// however large the directory and however it changes between pages:
//
//   - Removing an entry leaves its offset in sorted; its slot is 0, so
//     listings skip it, and lo remembers the removed run at the front that
//     a listing from the start has passed (rm -r lists from the start again
//     after each page it removes).
//   - Entries added after sorted was built are the tail of buf (offsets at
//     end and past): a listing sorts them apart and merges them in as it
//     goes, and folds them into sorted once they are more than an eighth of
//     it (and more than tailFold), so that sorting the tail again after
//     each add costs at most an eighth of the directory.
//   - Rewriting buf (dirents.rewrite, when half of it is removed entries)
//     moves the offsets: the order is carried over by looking each name up
//     in the new index, without sorting again.
//
// Building the order sorts by the eight bytes after the prefix all the
// directory's names share (mdtest's file.mdtest.0.), compared as one
// number, and compares whole names only between equal keys.
//
// The order belongs to the directory's header, which only the owner
// goroutine changes; a live freeze shares the header's sorted and ord
// until the engine copies the header (extra.unshare) but never reads
// them, so listings change them in place.

// tailFold is the fewest tail entries folded into sorted.
const tailFold = 1024

// order is what changed in a directory since its sorted was built.
type order struct {
	end     int      // sorted holds the entries at offsets below end
	lo      int      // sorted[:lo] are all removed
	tail    []uint32 // the live entries at end and past, in name order, when tailLen == len(buf)
	tailLen int      // len(buf) when tail was sorted; -1 = tail is stale
}

// removed notes that the entry at off was removed.
func (o *order) removed(off int) {
	if off >= o.end {
		o.tailLen = -1
	}
}

// nameIn is the name of the entry at off of buf.
func nameIn(buf []byte, off uint32) []byte {
	n := uint32(buf[off+4])
	return buf[off+entHeader : off+entHeader+n]
}

// sortOffsets sorts offs, offsets of entries in d.buf, by name.
func (d *dirents) sortOffsets(offs []uint32) {
	if len(offs) < 2 {
		return
	}
	// The prefix shared by all the names.
	first := d.nameAt(int(offs[0]))
	shared := len(first)
	for _, off := range offs[1:] {
		name := d.nameAt(int(off))
		shared = min(shared, len(name))
		for i := range shared {
			if name[i] != first[i] {
				shared = i
				break
			}
		}
		if shared == 0 {
			break
		}
	}
	type keyed struct {
		key uint64
		off uint32
	}
	keys := make([]keyed, len(offs))
	for i, off := range offs {
		var k [8]byte
		copy(k[:], d.nameAt(int(off))[shared:])
		keys[i] = keyed{binary.BigEndian.Uint64(k[:]), off}
	}
	slices.SortFunc(keys, func(a, b keyed) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return bytes.Compare(d.nameAt(int(a.off)), d.nameAt(int(b.off)))
	})
	for i := range keys {
		offs[i] = keys[i].off
	}
}

// liveBetween returns the offsets of the live entries of buf[from:].
func (d *dirents) liveBetween(from int, capacity int) []uint32 {
	offs := make([]uint32, 0, capacity)
	for off := from; off < len(d.buf); off = d.next(off) {
		if d.slotAt(off) != 0 {
			offs = append(offs, uint32(off))
		}
	}
	return offs
}

// prepareOrder builds d's order, or brings its tail up to date, for a
// listing.
func (d *dirents) prepareOrder() {
	if d.sorted == nil || d.ord == nil {
		offs := d.liveBetween(0, d.live)
		d.sortOffsets(offs)
		d.sorted, d.ord = offs, &order{end: len(d.buf), tailLen: len(d.buf)}
		return
	}
	o := d.ord
	if o.tailLen == len(d.buf) {
		return
	}
	tail := d.liveBetween(o.end, 0)
	d.sortOffsets(tail)
	o.tail, o.tailLen = tail, len(d.buf)
	if len(tail) > tailFold && len(tail)*8 > len(d.sorted) {
		d.sorted = d.liveOrder()
		d.ord = &order{end: len(d.buf), tailLen: len(d.buf)}
	}
}

// liveOrder returns the offsets of d's live entries in name order, from
// sorted and the tail, in a new slice.
func (d *dirents) liveOrder() []uint32 {
	d.prepareTail()
	o := d.ord
	out := make([]uint32, 0, d.live)
	s, t := d.sorted[o.lo:], o.tail
	for len(s) > 0 || len(t) > 0 {
		if len(s) > 0 && d.slotAt(int(s[0])) == 0 {
			s = s[1:]
			continue
		}
		if len(t) == 0 || len(s) > 0 && bytes.Compare(d.nameAt(int(s[0])), d.nameAt(int(t[0]))) < 0 {
			out = append(out, s[0])
			s = s[1:]
		} else {
			out = append(out, t[0])
			t = t[1:]
		}
	}
	return out
}

// prepareTail sorts the tail if it is stale, without folding it.
func (d *dirents) prepareTail() {
	o := d.ord
	if o.tailLen != len(d.buf) {
		o.tail = d.liveBetween(o.end, 0)
		d.sortOffsets(o.tail)
		o.tailLen = len(d.buf)
	}
}

// remap carries the order over a rewrite: offs holds, in name order, the
// offsets in old (the buffer before it) of the entries now in d.buf.
func (d *dirents) remap(old []byte, offs []uint32) {
	for i, off := range offs {
		offs[i] = uint32(d.findBytes(nameIn(old, off)))
	}
	d.sorted, d.ord = offs, &order{end: len(d.buf), tailLen: len(d.buf)}
}

// list calls fn with the offset of each live entry whose name sorts after
// cursor, in name order, until fn returns false; it reports whether it
// went past the last entry. fn must not change the directory.
func (d *dirents) list(cursor string, fn func(off int) bool) (end bool) {
	d.prepareOrder()
	o := d.ord
	s, t := d.sorted, o.tail
	i, j := o.lo, 0
	fromLo := true
	if cursor != "" {
		if k := d.after(s, cursor); k > i {
			i, fromLo = k, false
		}
		j = d.after(t, cursor)
	}
	for {
		for i < len(s) && d.slotAt(int(s[i])) == 0 {
			i++
		}
		if fromLo {
			o.lo, fromLo = i, false
		}
		var off uint32
		switch {
		case i < len(s) && (j == len(t) || bytes.Compare(d.nameAt(int(s[i])), d.nameAt(int(t[j]))) < 0):
			off = s[i]
			i++
		case j < len(t):
			off = t[j]
			j++
		default:
			return true
		}
		if !fn(int(off)) {
			return false
		}
	}
}

// after returns the position in offs (in name order) of the first entry
// whose name sorts after cursor.
func (d *dirents) after(offs []uint32, cursor string) int {
	i, _ := slices.BinarySearchFunc(offs, cursor, func(off uint32, c string) int {
		if string(d.nameAt(int(off))) <= c {
			return -1
		}
		return 1
	})
	return i
}
