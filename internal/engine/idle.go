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
// that needs its entries inflates it again.
//
// When every child of the directory is a plain node that nothing else
// names (not a directory, one link, not open, no extra record: at most a
// single slice), the children's node records are packed with the entries
// (deep packing), one column per field, and their slots keep only a ghost:
// the inode number, so that the inode index still finds them, and the
// extra record of their directory, so that reaching one by inode inflates
// the directory (store.wake). A slab chunk whose live nodes are all ghosts
// is released: what is left of it is a ghostChunk, 12 bytes a slot
// instead of 56. Packing never moves a node, frees a slot or changes the
// free list, so checkpoints, written in slot order, stay the same bytes.
//
// The sweep runs in bounded steps (CompactIdle) that the engine's owner
// calls when it has nothing else to do, so packing never sits in front of
// a request. Packing changes no result: names, slots, nodes and order stay.

// maxPackEntries is the largest directory the sweep packs: a step must stay
// short, and a directory this large is rarely idle for long.
const maxPackEntries = 4096

// The first byte of a packed directory, before the S2 block.
const (
	packShallow = 0 // entries only
	packDeep    = 1 // entries, then the children's nodes
)

// idleState is the idle sweep's bookkeeping and the packed directories'
// read cache. Like the rest of the store it belongs to the engine's owner
// goroutine (a frozen view's, to the goroutine encoding it).
type idleState struct {
	cursor     uint32 // the extra record the sweep visits next
	quiet      int    // records the sweep has visited in a row with nothing to do
	rounds     uint64 // rounds the sweep has begun
	packedDirs int    // directories packed now
	deepDirs   int    // of them, packed with their children's nodes
	released   int    // node chunks released
	inflations uint64 // packed directories inflated for use

	// ro, while above 0, makes a node kept in a packed directory read
	// from the packed bytes instead of inflating it: a frozen view is
	// always so; Check and the encoder are so while they run.
	ro int
	// cache holds the last packed directories decoded for reading (at
	// most cacheDirs, by their packed bytes' address), so that a walk in
	// slot order decodes each directory about once even when the
	// directories' nodes interleave: a decoded directory is made once and
	// never changed, so what was handed out stays valid. It is dropped
	// when the store stops being read only.
	cache map[*byte]*decodedDir
	ring  []*byte // the cache's keys, oldest first at next
	next  int     // the ring entry replaced next

	// raw, slots and recs are the inflater's scratch (idle_inflate.go),
	// kept from one inflation to the next so that a first access
	// allocates only what the directory keeps; recs holds no address
	// between inflations.
	raw   []byte
	slots []uint32
	recs  []*node
}

// cacheDirs bounds the decoded directories kept: at most about 4,096
// nodes of 56 bytes each.
const cacheDirs = 256

// beginRO makes the store read only (see idleState.ro) until endRO.
func (s *store) beginRO() { s.idle.ro++ }

// endRO ends a beginRO, dropping the read cache once the store is no
// longer read only.
func (s *store) endRO() {
	if s.idle.ro--; s.idle.ro == 0 {
		s.idle.cache, s.idle.ring, s.idle.next = nil, nil, 0
	}
}

// decodedDir is a deep-packed directory's nodes, by slot.
type decodedDir struct {
	packed []byte   // the packed bytes they came from
	slots  []uint32 // sorted
	nodes  []node   // nodes[i] is in slots[i]
}

// ghostChunk is what is left of a released node chunk: for each slot the
// inode number of its ghost (0: free) and its directory's extra record.
type ghostChunk struct {
	ino []Ino
	dir []uint32
}

// CompactIdle runs one step of the idle sweep: it visits directories in
// turn, clearing the mark of those used since its last visit and packing
// the others, until it has spent budget (an entry packed costs one, a
// directory visited one), or until the round ends: a directory marked in
// one round is packed in a later step at the earliest. It returns the work
// done (at least 1), 0 once a whole round found nothing to do.
func (e *Engine) CompactIdle(budget int) int {
	st := &e.st.idle
	records := int(e.st.extras.next) - 1 // extra records 1 .. next-1, live or not
	if st.quiet >= records {
		return 0
	}
	work := 0
	for work < budget && st.quiet < records {
		st.cursor++
		if int(st.cursor) > records {
			// A round ends the step, so that the pause between steps
			// falls between clearing a directory's mark and packing it.
			st.cursor = 0
			st.rounds++
			return max(work, 1)
		}
		work++
		x := e.st.extras.at(st.cursor)
		d := x.dir
		switch {
		case d == nil:
			st.quiet++
		case d.ref:
			d.ref = false
			st.quiet = 0
		case d.packed != nil || d.live == 0 || d.live > maxPackEntries:
			st.quiet++
		default:
			work += d.live
			// Packing changes the header a live freeze may read.
			d = e.st.extraMutAt(st.cursor).dir
			if e.deepPackable(d) {
				e.st.packDeep(d, st.cursor)
			} else {
				d.pack()
			}
			st.packedDirs++
			st.quiet = 0
		}
	}
	return work
}

// deepPackable reports whether every child of d may be kept in d's packed
// form: a node no other entry names, not open, with nothing beyond what
// packDeep keeps (no extra record).
func (e *Engine) deepPackable(d *dirents) bool {
	ok := true
	d.each(func(_ []byte, slot uint32) bool {
		n := e.st.nodes.at(slot)
		ok = n.Mode&S_IFMT != S_IFDIR && n.Mode != 0 && n.Nlink == 1 &&
			(n.aux == 0 || n.aux&singleBit != 0) && e.opens[n.Ino] == 0
		return ok
	})
	return ok
}

// IdleRounds returns the number of rounds the idle sweep has begun.
func (e *Engine) IdleRounds() uint64 { return e.st.idle.rounds }

// touch marks d used and inflates it if it is packed. Every operation on a
// directory's entries goes through it.
func (e *Engine) touch(d *dirents) *dirents {
	e.st.touch(d)
	return d
}

// touch marks d, which must not be shared with a live freeze, used, and
// inflates it if it is packed.
func (s *store) touch(d *dirents) {
	if !d.ref {
		d.ref = true
		s.idle.quiet = 0
	}
	if d.packed != nil {
		if d.packed[0] == packDeep {
			s.unpackDeep(d)
			s.idle.deepDirs--
		} else {
			s.unpackEntries(d)
		}
		s.idle.packedDirs--
		s.idle.inflations++
	}
}

// PackedDirs returns the number of directories packed now.
func (e *Engine) PackedDirs() int { return e.st.idle.packedDirs }

// DeepPackedDirs returns the number of directories packed now with their
// children's nodes.
func (e *Engine) DeepPackedDirs() int { return e.st.idle.deepDirs }

// ReleasedChunks returns the number of node slab chunks released because
// all their nodes are kept in packed directories.
func (e *Engine) ReleasedChunks() int { return e.st.idle.released }

// Inflations returns the number of times a packed directory was inflated.
func (e *Engine) Inflations() uint64 { return e.st.idle.inflations }

// appendEntries appends d's live entries, front-coded, to raw and returns
// it with their slots in order.
func (d *dirents) appendEntries(raw []byte, slots []uint32) ([]byte, []uint32) {
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
		if slots != nil {
			slots = append(slots, slot)
		}
	}
	return raw, slots
}

// seal compresses raw into d's packed form and frees the buffer and index.
func (d *dirents) seal(kind byte, raw []byte) {
	enc := s2.Encode(nil, raw)
	// Exactly the bytes needed: Encode's buffer is sized for the worst case.
	packed := make([]byte, 1+len(enc))
	packed[0] = kind
	copy(packed[1:], enc)
	d.packed = packed
	d.bufLen = len(d.buf) - d.dead
	d.buf, d.index, d.index16, d.sorted, d.dead, d.bufShared = nil, nil, nil, nil, 0, false
}

// pack compresses the live entries and frees the buffer and index.
func (d *dirents) pack() {
	raw, _ := d.appendEntries(make([]byte, 0, len(d.buf)-d.dead), nil)
	d.seal(packShallow, raw)
}

// packDeep packs d, the directory of extra record xi, with its children's
// nodes (deepPackable must hold), leaves ghosts in their slots and
// releases the chunks left with ghosts only.
func (s *store) packDeep(d *dirents, xi uint32) {
	raw, slots := d.appendEntries(make([]byte, 0, len(d.buf)-d.dead+16*d.live), make([]uint32, 0, d.live))
	nodes := make([]node, len(slots))
	for i, slot := range slots {
		nodes[i] = *s.nodes.at(slot)
	}
	raw = appendNodes(raw, nodes)
	d.seal(packDeep, raw)
	for i, slot := range slots {
		*s.nodes.mut(slot) = node{Ino: nodes[i].Ino, aux: xi}
	}
	s.idle.deepDirs++
	last := ^uint32(0)
	for _, slot := range slots {
		if c := slot / slabChunk; c != last {
			last = c
			s.releaseChunk(c)
		}
	}
}

// ghostAt reports whether slot, which must be live, holds a ghost.
func (s *store) ghostAt(slot uint32) bool {
	c := s.nodes.chunks[slot/slabChunk]
	return c == nil || c[slot%slabChunk].Mode == 0
}

// ghostOf returns the inode number of the ghost in slot (0: a free slot)
// and the extra record of its directory.
func (s *store) ghostOf(slot uint32) (Ino, uint32) {
	if c := s.nodes.chunks[slot/slabChunk]; c != nil {
		n := &c[slot%slabChunk]
		return n.Ino, n.aux
	}
	g := s.nodes.ghosts.at(slot / slabChunk)
	return g.ino[slot%slabChunk], g.dir[slot%slabChunk]
}

// wake inflates the directory of the ghost in slot.
func (s *store) wake(slot uint32) {
	if s.idle.ro > 0 {
		panic("engine: a node kept in a packed directory written while read only")
	}
	_, xi := s.ghostOf(slot)
	// Inflating changes the header a live freeze may read.
	s.touch(s.extraMutAt(xi).dir)
}

// zeroNode is what a free slot reads as.
var zeroNode node

// peekGhost returns the node whose ghost is in slot (a zero node for a
// free slot) for reading only: inflated with its directory, or, while the
// store is read only, read from the packed bytes.
func (s *store) peekGhost(slot uint32) *node {
	ino, _ := s.ghostOf(slot)
	if ino == 0 {
		return &zeroNode
	}
	if s.idle.ro == 0 {
		s.wake(slot)
		return s.nodes.at(slot)
	}
	return s.ghostCopy(slot)
}

// ghostCopy returns the node whose ghost is in slot, read from its packed
// directory, without changing anything but the read cache.
func (s *store) ghostCopy(slot uint32) *node {
	_, xi := s.ghostOf(slot)
	dd := s.decoded(s.extras.at(xi).dir.packed)
	i, found := slices.BinarySearch(dd.slots, slot)
	if !found {
		panic("engine: a ghost's directory does not hold it")
	}
	return &dd.nodes[i]
}

// decoded returns the nodes of the deep-packed directory packed.
func (s *store) decoded(packed []byte) *decodedDir {
	st := &s.idle
	if dd := st.cache[&packed[0]]; dd != nil {
		return dd
	}
	dd := decodeDir(packed)
	if st.cache == nil {
		st.cache = make(map[*byte]*decodedDir)
	}
	if len(st.ring) < cacheDirs {
		st.ring = append(st.ring, &packed[0])
	} else {
		delete(st.cache, st.ring[st.next])
		st.ring[st.next] = &packed[0]
		st.next = (st.next + 1) % cacheDirs
	}
	st.cache[&packed[0]] = dd
	return dd
}

// decodeDir decodes a deep-packed directory's nodes, ordered by slot.
func decodeDir(packed []byte) *decodedDir {
	var slots []uint32
	rest := eachRaw(decodePacked(packed), func(_ []byte, slot uint32) bool {
		slots = append(slots, slot)
		return true
	})
	nodes := decodeNodes(rest, len(slots))
	order := make([]int, len(slots))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(slots[a]) - int(slots[b]) })
	dd := &decodedDir{packed: packed, slots: make([]uint32, len(slots)), nodes: make([]node, len(slots))}
	for k, i := range order {
		dd.slots[k], dd.nodes[k] = slots[i], nodes[i]
	}
	return dd
}

// releaseChunk releases node chunk c if every live node in it is a ghost;
// the chunk holding the lowest slot never handed out stays.
func (s *store) releaseChunk(c uint32) {
	ns := &s.nodes
	chunk := ns.chunks[c]
	if chunk == nil || (c+1)*slabChunk > ns.next {
		return
	}
	for i := range chunk {
		if chunk[i].Ino != 0 && chunk[i].Mode != 0 {
			return
		}
	}
	g := &ghostChunk{ino: make([]Ino, slabChunk), dir: make([]uint32, slabChunk)}
	for i := range chunk {
		g.ino[i], g.dir[i] = chunk[i].Ino, chunk[i].aux
	}
	ns.ghosts.grow(len(ns.chunks), ns.epoch, ns.cow)
	// A live freeze keeps its own pages of the table: it still sees this
	// chunk.
	ns.setChunk(c, nil)
	ns.ghosts.set(c, g, ns.epoch, ns.cow)
	s.idle.released++
}

// materialize brings released node chunk c back into memory, its ghosts
// in their slots; a chunk in memory is left as it is.
func (s *store) materialize(c uint32) {
	ns := &s.nodes
	if ns.chunks[c] != nil {
		return
	}
	g := ns.ghosts.at(c)
	chunk := new([slabChunk]node)
	for i, ino := range g.ino {
		if ino != 0 {
			chunk[i] = node{Ino: ino, aux: g.dir[i]}
		}
	}
	ns.setChunk(c, chunk)
	ns.ghosts.set(c, nil, ns.epoch, ns.cow)
	ns.gens[c] = ns.epoch
	s.idle.released--
}

// appendNodes appends nodes to raw one column per field, each value
// relative to the one before it where that makes it small.
func appendNodes(raw []byte, nodes []node) []byte {
	var prev node
	for _, n := range nodes {
		raw = binary.AppendVarint(raw, int64(n.Ino-prev.Ino))
		prev.Ino = n.Ino
	}
	for _, n := range nodes {
		raw = binary.AppendUvarint(raw, n.Size)
	}
	for _, n := range nodes {
		raw = binary.AppendVarint(raw, n.Atime-prev.Atime)
		prev.Atime = n.Atime
	}
	for _, n := range nodes {
		raw = binary.AppendVarint(raw, n.Mtime-n.Atime)
	}
	for _, n := range nodes {
		raw = binary.AppendVarint(raw, n.Ctime-n.Mtime)
	}
	for _, n := range nodes {
		raw = binary.AppendUvarint(raw, uint64(n.Mode))
	}
	for _, n := range nodes {
		raw = binary.AppendUvarint(raw, uint64(n.Nlink))
	}
	for _, n := range nodes {
		raw = binary.AppendUvarint(raw, uint64(n.own))
	}
	for _, n := range nodes {
		raw = binary.AppendUvarint(raw, uint64(n.aux))
	}
	return raw
}

// decodeNodes reads count nodes written by appendNodes.
func decodeNodes(raw []byte, count int) []node {
	nodes := make([]node, count)
	recs := make([]*node, count)
	for i := range nodes {
		recs[i] = &nodes[i]
	}
	decodeNodesInto(raw, recs)
	return nodes
}

// decodeNodesInto reads len(recs) nodes written by appendNodes into recs.
// The bytes were made in this process, so they are trusted.
func decodeNodesInto(raw []byte, recs []*node) {
	uv := func() uint64 {
		v, k := binary.Uvarint(raw)
		raw = raw[k:]
		return v
	}
	sv := func() int64 {
		v, k := binary.Varint(raw)
		raw = raw[k:]
		return v
	}
	var prev node
	for _, n := range recs {
		prev.Ino += Ino(sv())
		n.Ino = prev.Ino
	}
	for _, n := range recs {
		n.Size = uv()
	}
	for _, n := range recs {
		prev.Atime += sv()
		n.Atime = prev.Atime
	}
	for _, n := range recs {
		n.Mtime = n.Atime + sv()
	}
	for _, n := range recs {
		n.Ctime = n.Mtime + sv()
	}
	for _, n := range recs {
		n.Mode = uint32(uv())
	}
	for _, n := range recs {
		n.Nlink = uint32(uv())
	}
	for _, n := range recs {
		n.own = uint32(uv())
	}
	for _, n := range recs {
		n.aux = uint32(uv())
	}
}

// decodePacked returns the uncompressed bytes of a packed directory. The
// packed bytes were made by pack in this process, so they are trusted.
func decodePacked(packed []byte) []byte {
	raw, err := s2.Decode(nil, packed[1:])
	if err != nil {
		panic("engine: packed directory does not decode: " + err.Error())
	}
	return raw
}

// eachPacked calls fn for every entry of a packed directory, in order,
// until fn returns false.
func eachPacked(packed []byte, fn func(name []byte, slot uint32) bool) {
	eachRaw(decodePacked(packed), fn)
}

// eachRaw calls fn for every entry of an uncompressed packed directory, in
// order, until fn returns false, and returns what follows the entries
// (when fn never returned false).
func eachRaw(raw []byte, fn func(name []byte, slot uint32) bool) []byte {
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
			return nil
		}
	}
	return raw
}
