package engine

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// Load's fast paths (checkpoint.go): a checkpoint names its node count
// and each directory's entry count before them, so Load sizes the inode
// index once. While it reads the nodes and the entries, an array indexed
// by local inode number (the allocator bounds them) maps inodes to slots
// and finds repeats, when the numbers are dense enough for it (at most
// four times as many numbers handed out as nodes): its lookups follow
// the order inodes were made in, where the index's hash is a cache miss
// each; the index is filled once the nodes are read. Otherwise a node is
// inserted with one probe that also finds a repeat. Load
// appends a directory's entries without indexing them one by one, and
// indexes the directory once its entries are read (finding repeated
// names then). The engine built is the one adding them one at a time
// would build, but for the sizes of its indexes and buffers, which are
// those a reindex of the same contents makes.

// maxReserve bounds the nodes Load sizes its index and dense map for
// before reading them (134 million: an index of 0.7 GB, a dense map of up
// to 2 GB, neither touched until used).
const maxReserve = 1 << 27

// reserve sizes an empty index for n entries, so that inserting them
// does not grow it.
func (x *inoIndex) reserve(n int) {
	if x.count != 0 || n*16 <= len(x.slots)*maxIndexLoad {
		return
	}
	size := 64
	for n*16 > size*maxIndexLoad {
		size *= 2
	}
	x.slots = make([]uint32, size)
	x.shift = uint8(64 - bits.TrailingZeros(uint(size)))
}

// addNew is store.add for a node that may repeat one already there: it
// returns ok false, adding nothing, if ino is there.
func (s *store) addNew(ino Ino) (n *node, ok bool) {
	x := &s.index
	if (x.count+1)*16 > len(x.slots)*maxIndexLoad {
		x.grow(&s.nodes)
	}
	mask := len(x.slots) - 1
	i := x.home(ino)
	for x.slots[i] != 0 {
		if s.nodes.at(x.slots[i]).Ino == ino {
			return nil, false
		}
		i = (i + 1) & mask
	}
	slot, n := s.nodes.alloc()
	n.Ino = ino
	s.owners.ref(0, 0)
	x.slots[i] = slot
	x.count++
	return n, true
}

// loadEntry appends the entry name -> slot while a checkpoint is read,
// leaving the index to loaded.
func (d *dirents) loadEntry(name []byte, slot uint32) {
	d.buf = binary.LittleEndian.AppendUint32(d.buf, slot)
	d.buf = append(d.buf, byte(len(name)))
	d.buf = append(d.buf, name...)
	d.live++
}

// loaded ends the entries loadEntry appended: it trims the buffer's spare
// room to what addEntry would leave at most, and indexes the entries. It
// returns a name found twice, or nil.
func (d *dirents) loaded() []byte {
	if len(d.buf)+len(d.buf)/16 < cap(d.buf) {
		d.buf = slices.Clone(d.buf)
	}
	d.sorted = nil
	if d.live <= smallDir {
		d.index, d.index16 = nil, nil
		for off := 0; off < len(d.buf); off = d.next(off) {
			for o := d.next(off); o < len(d.buf); o = d.next(o) {
				if string(d.nameAt(o)) == string(d.nameAt(off)) {
					return d.nameAt(o)
				}
			}
		}
		return nil
	}
	d.newIndex(2*d.live + 1) // as reindex sizes it
	if d.index16 != nil {
		return loadIndex(d, d.index16)
	}
	return loadIndex(d, d.index)
}

// loadIndex fills the empty index cells ix of d with its entries and
// returns a name found twice, or nil.
func loadIndex[C uint16 | uint32](d *dirents, ix []C) []byte {
	n := len(ix)
	for off := 0; off < len(d.buf); off = d.next(off) {
		name := d.nameAt(off)
		i := pos(hashOf(name), n)
		for ix[i] != 0 {
			if string(d.nameAt(int(ix[i]-1))) == string(name) {
				return name
			}
			if i++; i == n {
				i = 0
			}
		}
		ix[i] = C(off + 1)
	}
	return nil
}

// denseFor sets up the dense inode map for a checkpoint of count nodes
// in e, whose allocator is read, if its numbers are dense enough.
func (d *decoder) denseFor(e *Engine, count uint64) {
	if e.next <= 4*count+1<<16 {
		d.dense = make([]uint32, e.next)
	}
}

// local returns ino's index in the dense map, or false if it is not
// one of e's allocated numbers.
func (d *decoder) local(e *Engine, ino Ino) (uint64, bool) {
	l := uint64(ino) & (1<<localBits - 1)
	return l, ino.Partition() == e.part && l < uint64(len(d.dense))
}

// add adds the node ino being loaded; ok is false if it is there already.
func (d *decoder) add(e *Engine, ino Ino) (n *node, ok bool) {
	if d.dense == nil {
		return e.st.addNew(ino)
	}
	l, in := d.local(e, ino)
	if !in {
		d.err = fmt.Errorf("node %d outside the allocated range (next %d)", ino, e.next)
		return nil, false
	}
	if d.dense[l] != 0 {
		return nil, false
	}
	slot, n := e.st.nodes.alloc()
	n.Ino = ino
	e.st.owners.ref(0, 0)
	d.dense[l] = slot
	return n, true
}

// slotOf returns the slot of the loaded node ino, or 0.
func (d *decoder) slotOf(e *Engine, ino Ino) uint32 {
	if d.dense == nil {
		return e.st.slotOf(ino)
	}
	l, in := d.local(e, ino)
	if !in {
		return 0
	}
	return d.dense[l]
}

// nodeOf returns the loaded node ino, or nil.
func (d *decoder) nodeOf(e *Engine, ino Ino) *node {
	if slot := d.slotOf(e, ino); slot != 0 {
		return e.st.nodes.mut(slot)
	}
	return nil
}

// indexAll puts every node into the inode index (reserved for them), in
// slot order, once the dense map has been used to load them.
func (s *store) indexAll() {
	for c, chunk := range s.nodes.chunks {
		for i := range chunk {
			if ino := chunk[i].Ino; ino != 0 {
				s.index.insert(ino, uint32(c*slabChunk+i), &s.nodes)
			}
		}
	}
}
