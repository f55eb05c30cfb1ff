package engine

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
)

// dirents is one directory's entries, without a Go allocation per entry:
//
//   - buf holds the entries packed one after another, each the child's
//     node slot (4 bytes, little endian), the name's length (1 byte) and
//     the name. A removed entry keeps its bytes with slot 0 until the
//     buffer is rewritten.
//   - index is an open-addressing table over the live entries' offsets
//     (offset+1; 0 is empty), placed by a hash of the name. While every
//     offset+1 fits in 16 bits (a buffer under 64 KiB: directories of up
//     to about 3,000 entries) the table is index16, of 2-byte cells,
//     instead: half the bytes. Small directories have neither and are
//     scanned.
//   - sorted is the entries' offsets in name order, built for paged
//     listings by the first listing and kept from then on (ord says how;
//     listing.go); nil until then, and again after packing or loading.
//   - packed is the compressed form of an idle directory (idle.go): buf,
//     index and sorted are nil while it is set.
//
// While a freeze is live, the freeze reads buf up to its length at the
// freeze and packed; the engine changes a copy of the header (see
// extra.unshare), and bufShared says that buf's bytes are still the
// freeze's: appending past them is safe, overwriting them is not (ownBuf).
type dirents struct {
	buf       []byte
	index     []uint32
	index16   []uint16
	sorted    []uint32
	ord       *order // with sorted: what changed since sorted was built
	packed    []byte
	live      int  // live entries
	bufLen    int  // while packed: the length of buf unpacked
	dead      int  // bytes of removed entries in buf
	ref       bool // used since the idle sweep last passed
	bufShared bool // buf's bytes may be a live freeze's: copy before overwriting
}

// Sizes of the entry layout.
const (
	entHeader = 5 // slot and name length

	// smallDir is the most entries a directory scans instead of indexing;
	// an index is dropped again below smallDir/2.
	smallDir = 8
)

var nameSeed = maphash.MakeSeed()

func hashName(name string) uint32 { return uint32(maphash.String(nameSeed, name)) }

// hashOf is hashName for a name held in a string or in bytes (the two
// hash alike).
func hashOf[S string | []byte](name S) uint32 {
	switch n := any(name).(type) {
	case string:
		return hashName(n)
	case []byte:
		return uint32(maphash.Bytes(nameSeed, n))
	}
	panic("unreachable")
}

// pos maps a hash to a bucket of an index of n buckets.
func pos(h uint32, n int) int { return int(uint64(h) * uint64(n) >> 32) }

func (d *dirents) slotAt(off int) uint32 { return binary.LittleEndian.Uint32(d.buf[off:]) }

func (d *dirents) setSlotAt(off int, slot uint32) {
	if d.bufShared {
		d.ownBuf()
	}
	binary.LittleEndian.PutUint32(d.buf[off:], slot)
}

// ownBuf gives d its own copy of buf, which a live freeze may share.
func (d *dirents) ownBuf() {
	d.buf = append(make([]byte, 0, cap(d.buf)), d.buf...)
	d.bufShared = false
}

// nameAt returns the name of the entry at off, sharing buf's bytes: it is
// valid only until the next change of the directory.
func (d *dirents) nameAt(off int) []byte {
	n := int(d.buf[off+4])
	return d.buf[off+entHeader : off+entHeader+n]
}

// nameString returns the name of the entry at off as a string of its own.
func (d *dirents) nameString(off int) string { return string(d.nameAt(off)) }

// next returns the offset of the entry after the one at off.
func (d *dirents) next(off int) int { return off + entHeader + int(d.buf[off+4]) }

// find returns the offset of the live entry name, or -1.
func (d *dirents) find(name string) int { return findEntry(d, name) }

// findBytes is find for a name held in bytes.
func (d *dirents) findBytes(name []byte) int { return findEntry(d, name) }

func findEntry[S string | []byte](d *dirents, name S) int {
	switch {
	case d.index16 != nil:
		return probe(d, d.index16, name)
	case d.index != nil:
		return probe(d, d.index, name)
	}
	for off := 0; off < len(d.buf); off = d.next(off) {
		if d.slotAt(off) != 0 && string(d.nameAt(off)) == string(name) {
			return off
		}
	}
	return -1
}

// probe finds name through the index cells ix (d.index or d.index16).
func probe[C uint16 | uint32, S string | []byte](d *dirents, ix []C, name S) int {
	n := len(ix)
	for i := pos(hashOf(name), n); ; i++ {
		if i == n {
			i = 0
		}
		v := ix[i]
		if v == 0 {
			return -1
		}
		if off := int(v - 1); string(d.nameAt(off)) == string(name) {
			return off
		}
	}
}

// indexed reports whether d has an index (of either width).
func (d *dirents) indexed() bool { return d.index != nil || d.index16 != nil }

// cells returns the size of d's index.
func (d *dirents) cells() int { return len(d.index) + len(d.index16) }

// cell returns the index cell i.
func (d *dirents) cell(i int) uint32 {
	if d.index16 != nil {
		return uint32(d.index16[i])
	}
	return d.index[i]
}

// setCell sets the index cell i to v, which fits it (see fits16).
func (d *dirents) setCell(i int, v uint32) {
	if d.index16 != nil {
		d.index16[i] = uint16(v)
	} else {
		d.index[i] = v
	}
}

// fits16 reports whether an index of 2-byte cells can hold the entries
// of a buffer of length n: every offset+1 below it fits.
func fits16(n int) bool { return n < 1<<16 }

// newIndex gives d an empty index of at least cells cells (the size
// class's spare room used as cells too), 2-byte ones if the buffer's
// offsets fit them.
func (d *dirents) newIndex(cells int) {
	d.index, d.index16 = nil, nil
	if fits16(len(d.buf)) {
		d.index16 = slices.Grow([]uint16(nil), cells)
		d.index16 = d.index16[:cap(d.index16)]
		return
	}
	d.index = slices.Grow([]uint32(nil), cells)
	d.index = d.index[:cap(d.index)]
}

// lookup returns the slot of the child name, or 0.
func (d *dirents) lookup(name string) uint32 {
	if off := d.find(name); off >= 0 {
		return d.slotAt(off)
	}
	return 0
}

// add appends the entry name -> slot; name must not be there.
func (d *dirents) add(name string, slot uint32) { addEntry(d, name, slot) }

// addBytes is add for a name held in bytes.
func (d *dirents) addBytes(name []byte, slot uint32) { addEntry(d, name, slot) }

func addEntry[S string | []byte](d *dirents, name S, slot uint32) {
	off := len(d.buf)
	if need := off + entHeader + len(name); need > cap(d.buf) {
		// Grow by a sixteenth rather than append's quarter or more: the
		// buffer is most of a directory's memory, and copying it now and
		// then costs little next to the entries it holds. slices.Grow
		// makes the capacity the whole allocation (its size class), so no
		// byte of it is lost to rounding.
		buf := slices.Grow([]byte(nil), max(need+need/16, 64))[:off]
		copy(buf, d.buf)
		d.buf, d.bufShared = buf, false
	}
	d.buf = binary.LittleEndian.AppendUint32(d.buf, slot)
	d.buf = append(d.buf, byte(len(name)))
	d.buf = append(d.buf, name...)
	d.live++
	if d.sorted != nil {
		d.ord.tailLen = -1 // the new entry is in the tail
	}
	switch {
	case d.indexed():
		if (d.live+1)*4 > d.cells()*3 || (d.index16 != nil && !fits16(off+1)) {
			d.reindex()
		} else {
			d.place(off)
		}
	case d.live > smallDir:
		d.reindex()
	}
}

// remove deletes the live entry name and returns its slot (0 if absent).
func (d *dirents) remove(name string) uint32 {
	off := d.find(name)
	if off < 0 {
		return 0
	}
	slot := d.slotAt(off)
	if d.indexed() {
		d.unplace(off)
	}
	d.setSlotAt(off, 0)
	d.live--
	d.dead += entHeader + len(name)
	if d.sorted != nil {
		d.ord.removed(off)
	}
	if d.dead > 256 && d.dead*2 > len(d.buf) {
		d.rewrite()
	} else if d.indexed() && (d.live < smallDir/2 || d.live*8 < d.cells()) {
		d.reindex()
	}
	return slot
}

// replace points the live entry name at slot instead.
func (d *dirents) replace(name string, slot uint32) {
	if off := d.find(name); off >= 0 {
		d.setSlotAt(off, slot)
	}
}

// place puts the entry at off into the index.
func (d *dirents) place(off int) {
	n := d.cells()
	i := pos(hashName(string(d.nameAt(off))), n)
	for d.cell(i) != 0 {
		if i++; i == n {
			i = 0
		}
	}
	d.setCell(i, uint32(off+1))
}

// unplace takes the entry at off out of the index, shifting later entries
// of its run back so that no lookup stops short.
func (d *dirents) unplace(off int) {
	n := d.cells()
	i := pos(hashName(string(d.nameAt(off))), n)
	for d.cell(i) != uint32(off+1) {
		if i++; i == n {
			i = 0
		}
	}
	for j := i + 1; ; j++ {
		if j == n {
			j = 0
		}
		v := d.cell(j)
		if v == 0 {
			break
		}
		h := pos(hashName(string(d.nameAt(int(v-1)))), n)
		if (j-h+n)%n >= (j-i+n)%n {
			d.setCell(i, v)
			i = j
		}
	}
	d.setCell(i, 0)
}

// reindex builds the index for the live entries, or drops it for a small
// directory. A new index is half full.
func (d *dirents) reindex() {
	if d.live <= smallDir/2 || (!d.indexed() && d.live <= smallDir) {
		d.index, d.index16 = nil, nil
		return
	}
	d.newIndex(2*d.live + 1)
	for off := 0; off < len(d.buf); off = d.next(off) {
		if d.slotAt(off) != 0 {
			d.place(off)
		}
	}
}

// rewrite drops removed entries from buf; offsets change, so the index is
// rebuilt.
func (d *dirents) rewrite() {
	var order []uint32
	if d.sorted != nil {
		order = d.liveOrder()
	}
	old := d.buf
	buf := make([]byte, 0, len(d.buf)-d.dead)
	for off := 0; off < len(d.buf); off = d.next(off) {
		if d.slotAt(off) != 0 {
			buf = append(buf, d.buf[off:d.next(off)]...)
		}
	}
	d.buf, d.dead, d.sorted, d.bufShared = buf, 0, nil, false
	d.index, d.index16 = nil, nil
	d.reindex()
	if order != nil {
		d.remap(old, order)
	}
}

// each calls fn for every live entry, in the order they were added, until
// fn returns false. name shares the directory's bytes: fn must not keep it
// or change the directory.
func (d *dirents) each(fn func(name []byte, slot uint32) bool) {
	if d.packed != nil {
		eachPacked(d.packed, fn)
		return
	}
	for off := 0; off < len(d.buf); off = d.next(off) {
		if slot := d.slotAt(off); slot != 0 && !fn(d.nameAt(off), slot) {
			return
		}
	}
}
