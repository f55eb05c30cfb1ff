package engine

import (
	"encoding/binary"
	"slices"

	"github.com/klauspost/compress/s2"
)

// Idle directories are kept compressed. A directory that no operation has
// touched since the idle sweep last passed it is packed: its entries are
// front-coded (each name as the length it shares with the name before it
// plus the rest, each slot as the difference from the slot before it) and
// compressed with S2; its buffer and index are freed. The first operation
// that needs its entries inflates it again, which for 1,000 entries costs
// tens of microseconds.
//
// The sweep runs in bounded steps (CompactIdle) that the engine's owner
// calls when it has nothing else to do, so packing never sits in front of
// a request. Packing changes no result: names, slots and order stay.

// maxPackEntries is the largest directory the sweep packs: a step must stay
// short, and a directory this large is rarely idle for long.
const maxPackEntries = 4096

// CompactIdle runs one step of the idle sweep: it visits directories in
// turn, clearing the mark of those used since its last visit and packing
// the others, until it has spent budget (an entry packed costs one, a
// directory visited one), or until the round ends: a directory marked in
// one round is packed in a later step at the earliest. It returns the work
// done (at least 1), 0 once a whole round found nothing to do.
func (e *Engine) CompactIdle(budget int) int {
	records := int(e.st.extras.next) - 1 // extra records 1 .. next-1, live or not
	if e.idleQuiet >= records {
		return 0
	}
	work := 0
	for work < budget && e.idleQuiet < records {
		e.idleCursor++
		if int(e.idleCursor) > records {
			// A round ends the step, so that the pause between steps
			// falls between clearing a directory's mark and packing it.
			e.idleCursor = 0
			e.idleRounds++
			return max(work, 1)
		}
		work++
		x := e.st.extras.at(e.idleCursor)
		d := x.dir
		switch {
		case d == nil:
			e.idleQuiet++
		case d.ref:
			d.ref = false
			e.idleQuiet = 0
		case d.packed != nil || d.live == 0 || d.live > maxPackEntries:
			e.idleQuiet++
		default:
			work += d.live
			d.pack()
			e.packedDirs++
			e.idleQuiet = 0
		}
	}
	return work
}

// IdleRounds returns the number of rounds the idle sweep has begun.
func (e *Engine) IdleRounds() uint64 { return e.idleRounds }

// touch marks d used and inflates it if it is packed. Every operation on a
// directory's entries goes through it.
func (e *Engine) touch(d *dirents) *dirents {
	if !d.ref {
		d.ref = true
		e.idleQuiet = 0
	}
	if d.packed != nil {
		d.unpack()
		e.packedDirs--
		e.inflations++
	}
	return d
}

// PackedDirs returns the number of directories packed now.
func (e *Engine) PackedDirs() int { return e.packedDirs }

// Inflations returns the number of times a packed directory was inflated.
func (e *Engine) Inflations() uint64 { return e.inflations }

// pack compresses the live entries and frees the buffer and index.
func (d *dirents) pack() {
	raw := make([]byte, 0, len(d.buf)-d.dead)
	raw = binary.AppendUvarint(raw, uint64(d.live))
	var prevSlot uint32
	var prev []byte
	for off := 0; off < len(d.buf); off = d.next(off) {
		slot := d.slotAt(off)
		if slot == 0 {
			continue
		}
		name := d.nameAt(off)
		shared := 0
		for shared < len(name) && shared < len(prev) && name[shared] == prev[shared] {
			shared++
		}
		raw = binary.AppendVarint(raw, int64(slot)-int64(prevSlot))
		raw = append(raw, byte(shared), byte(len(name)-shared))
		raw = append(raw, name[shared:]...)
		prevSlot, prev = slot, name
	}
	d.packed = s2.Encode(nil, raw)
	d.bufLen = len(d.buf) - d.dead
	d.buf, d.index, d.sorted, d.dead = nil, nil, nil, 0
}

// unpack restores the buffer and index of a packed directory.
func (d *dirents) unpack() {
	packed := d.packed
	d.packed = nil
	d.buf = slices.Grow([]byte(nil), d.bufLen)
	eachPacked(packed, func(name []byte, slot uint32) bool {
		d.buf = binary.LittleEndian.AppendUint32(d.buf, slot)
		d.buf = append(d.buf, byte(len(name)))
		d.buf = append(d.buf, name...)
		return true
	})
	d.reindex()
}

// eachPacked calls fn for every entry of a packed directory, in order,
// until fn returns false. The packed bytes were made by pack in this
// process, so they are trusted.
func eachPacked(packed []byte, fn func(name []byte, slot uint32) bool) {
	raw, err := s2.Decode(nil, packed)
	if err != nil {
		panic("engine: packed directory does not decode: " + err.Error())
	}
	count, k := binary.Uvarint(raw)
	raw = raw[k:]
	var name [MaxNameLen]byte
	var slot int64
	for range count {
		delta, k := binary.Varint(raw)
		raw = raw[k:]
		slot += delta
		shared, rest := int(raw[0]), int(raw[1])
		copy(name[shared:], raw[2:2+rest])
		raw = raw[2+rest:]
		if !fn(name[:shared+rest], uint32(slot)) {
			return
		}
	}
}
