package engine

import (
	"encoding/binary"
	"slices"

	"github.com/klauspost/compress/s2"
)

// Inflating a packed directory is what its first access pays, so it is
// kept to one pass over the packed bytes: S2 decodes into a scratch buffer
// the store keeps (idleState.raw), the entries are rebuilt straight into
// the directory's new buffer (a shared prefix is copied from the entry
// before it, which is already there), and the nodes of a deep-packed
// directory are decoded column by column into their slots. What is
// allocated is what the directory keeps: its buffer, its index and the
// node chunks brought back. All of it runs on the engine's owner
// goroutine, which owns the scratch.

// maxScratch is the largest scratch kept between inflations; a larger one
// (a directory near maxPackEntries with long names) goes after use.
const maxScratch = 256 << 10

// inflateRaw returns the uncompressed bytes of packed, decoded into the
// store's scratch: valid until the next inflation.
func (st *idleState) inflateRaw(packed []byte) []byte {
	n, err := s2.DecodedLen(packed[1:])
	if err != nil {
		panic("engine: packed directory does not decode: " + err.Error())
	}
	if cap(st.raw) < n {
		st.raw = make([]byte, n)
	}
	raw, err := s2.Decode(st.raw[:n], packed[1:])
	if err != nil {
		panic("engine: packed directory does not decode: " + err.Error())
	}
	return raw
}

// dropScratch lets go of scratch grown past maxScratch.
func (st *idleState) dropScratch() {
	if cap(st.raw) > maxScratch {
		st.raw = nil
	}
	if cap(st.slots) > maxScratch/4 {
		st.slots, st.recs = nil, nil
	}
}

// unpack restores the buffer and index of a packed directory (its
// entries only: a deep-packed one goes through store.unpackDeep).
func (d *dirents) unpack() {
	d.inflateEntries(decodePacked(d.packed), nil, false)
}

// unpackEntries is unpack with the store's scratch.
func (s *store) unpackEntries(d *dirents) {
	d.inflateEntries(s.idle.inflateRaw(d.packed), nil, false)
	s.idle.dropScratch()
}

// inflateEntries rebuilds d's buffer and index from raw, the uncompressed
// packed bytes, and drops the packed form. With keep, it appends each
// entry's slot to slots, in order. It returns what follows the entries.
// The bytes were made by pack in this process, so they are trusted.
func (d *dirents) inflateEntries(raw []byte, slots []uint32, keep bool) ([]byte, []uint32) {
	count, k := binary.Uvarint(raw)
	raw = raw[k:]
	buf := slices.Grow([]byte(nil), d.bufLen)
	prev := 0 // offset of the entry before, in buf
	var slot uint32
	for i := range count {
		var delta int64
		delta, raw = varint(raw)
		slot += uint32(delta)
		shared, rest := int(raw[0]), int(raw[1])
		off := len(buf)
		buf = binary.LittleEndian.AppendUint32(buf, slot)
		buf = append(buf, byte(shared+rest))
		if i > 0 && shared > 0 {
			// buf has room for all entries (bufLen), so this appends
			// in place, after the bytes it copies from.
			buf = append(buf, buf[prev+entHeader:prev+entHeader+shared]...)
		}
		buf = append(buf, raw[2:2+rest]...)
		raw = raw[2+rest:]
		prev = off
		if keep {
			slots = append(slots, slot)
		}
	}
	d.packed = nil
	d.buf, d.bufShared = buf, false
	d.reindex()
	return raw, slots
}

// unpackDeep inflates the deep-packed d, which must not be shared with a
// live freeze: the entries as unpack does, and the children's nodes back
// into their slots.
func (s *store) unpackDeep(d *dirents) {
	st := &s.idle
	rest, slots := d.inflateEntries(st.inflateRaw(d.packed), st.slots[:0], true)
	st.slots = slots
	last := ^uint32(0)
	for _, slot := range slots {
		if c := slot / slabChunk; c != last {
			last = c
			s.materialize(c)
		}
	}
	st.recs = decodeNodesAt(rest, &s.nodes, slots, st.recs)
	st.dropScratch()
}

// decodeNodesAt reads len(slots) nodes written by appendNodes into the
// node slab's slots, whose chunks are in memory. Each slot is found once,
// through slab.mut, so that a chunk a live freeze shares is copied before
// it is written; recs is scratch for the nodes' addresses, cleared before
// it is returned.
func decodeNodesAt(raw []byte, nodes *slab[node], slots []uint32, recs []*node) []*node {
	recs = recs[:0]
	var u uint64
	var v, prev int64
	for _, slot := range slots {
		v, raw = varint(raw)
		prev += v
		n := nodes.mut(slot)
		n.Ino = Ino(prev)
		recs = append(recs, n)
	}
	for _, n := range recs {
		n.Size, raw = uvarint(raw)
	}
	prev = 0
	for _, n := range recs {
		v, raw = varint(raw)
		prev += v
		n.Atime = prev
	}
	for _, n := range recs {
		v, raw = varint(raw)
		n.Mtime = n.Atime + v
	}
	for _, n := range recs {
		v, raw = varint(raw)
		n.Ctime = n.Mtime + v
	}
	for _, n := range recs {
		u, raw = uvarint(raw)
		n.Mode = uint32(u)
	}
	for _, n := range recs {
		u, raw = uvarint(raw)
		n.Nlink = uint32(u)
	}
	for _, n := range recs {
		u, raw = uvarint(raw)
		n.own = uint32(u)
	}
	for _, n := range recs {
		u, raw = uvarint(raw)
		n.aux = uint32(u)
	}
	// The addresses would keep node chunks from being collected.
	clear(recs)
	return recs
}

// uvarint decodes the unsigned varint at the start of raw, trusted bytes,
// and returns it with the bytes after it; one-byte values, most of a
// packed directory's, take the short way.
func uvarint(raw []byte) (uint64, []byte) {
	if b := raw[0]; b < 0x80 {
		return uint64(b), raw[1:]
	}
	v, k := binary.Uvarint(raw)
	return v, raw[k:]
}

// varint is uvarint for a signed (zig-zag) varint.
func varint(raw []byte) (int64, []byte) {
	u, raw := uvarint(raw)
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v, raw
}
