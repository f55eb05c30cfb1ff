package engine

// The storage layout of the namespace, laid out so that the garbage
// collector has almost nothing to scan and every file costs a few dozen
// bytes (docs/engine.md, "Storage layout"):
//
//   - Nodes are fixed-size, pointer-free records in a slab of large chunks
//     (slab[node]); a chunk holds slabChunk records and never moves, so a
//     *node stays valid until its slot is released.
//   - inoIndex maps an inode number to its slot: open addressing over an
//     array of slots, keyed by the Ino stored in the record itself.
//   - What only some nodes have (a directory's entries and parent, a
//     symlink's target, xattrs, a file's chunks) lives in an extra record
//     that the node names by index; a plain empty file has none, and a
//     file whose data is one slice and has nothing else keeps the slice
//     in a 32-byte pointer-free record instead (single).
//   - A directory's entries are packed bytes with their own index
//     (dirents.go), compressed while the directory is idle (idle.go).
//
// Ownership: like the rest of the engine, the store belongs to the one
// goroutine that owns the Engine.

import (
	"iter"
	"math/bits"
	"slices"
)

// node is one inode: its attributes, with the owner and group as the id
// of their pair (owners.go), and in aux the index of its extra record (0:
// none). The other field names are Attr's, so that node and Attr read
// alike; node must stay free of pointers (the slab's chunks are then never
// scanned) and at 56 bytes.
type node struct {
	Ino   Ino
	Size  uint64 // bytes; for a symlink the target's length; for a directory 4096
	Atime int64  // nanoseconds since the Unix epoch
	Mtime int64
	Ctime int64
	Mode  uint32 // type bits and permission bits
	Nlink uint32
	own   uint32 // the (uid, gid) pair's id in store.owners
	aux   uint32 // index of the extra record in store.extras, or with singleBit of the single in store.singles; 0: neither
}

// attr returns n's attributes.
func (e *Engine) attr(n *node) Attr {
	o := e.st.owners.get(n.own)
	return Attr{
		Ino: n.Ino, Mode: n.Mode, UID: o.uid, GID: o.gid, Nlink: n.Nlink, Size: n.Size,
		Atime: n.Atime, Mtime: n.Mtime, Ctime: n.Ctime, Rdev: e.rdev(n),
	}
}

// rdev returns a device node's device number, kept in its extra record.
func (e *Engine) rdev(n *node) uint32 {
	if x := e.st.extraOf(n); x != nil {
		return x.rdev
	}
	return 0
}

func (n *node) isDir() bool { return n.Mode&S_IFMT == S_IFDIR }

// extra holds what only some nodes have. Unlike node it has pointers, and
// so costs the collector a scan; plain files never have one.
type extra struct {
	parent Ino               // directories only: the directory that holds it (root: itself)
	dir    *dirents          // directories only
	target string            // symlinks only
	xattrs map[string][]byte // nil when there are none
	file   *fileData         // regular files with data only
	rdev   uint32            // character and block devices only: the device number
	gen    uint32            // the epoch at which dir, xattrs and file were made this record's own (freeze.go)
}

// singleBit marks a node's aux as naming a single rather than an extra.
const singleBit = 1 << 31

// single is the compact form of a regular file's data when it is one slice
// in one chunk and the file has no extra record: no fileData, no chunk
// list, no slice list, nothing for the collector to scan.
type single struct {
	slice Slice
	chunk uint32
}

// empty reports whether x holds nothing.
func (x *extra) empty() bool {
	return x.dir == nil && x.target == "" && x.xattrs == nil && x.file == nil && x.rdev == 0
}

// slabChunk is the records per slab chunk: 146 nodes (or extra records)
// make a chunk of 8,176 bytes, in the 8 KiB size class with 16 bytes to
// spare and alone in its span, so that a released chunk's memory goes back
// whole; large enough that the chunk tables stay small (16 bytes a chunk:
// a pointer in the table and one in its pages), and small enough that a
// chunk whose nodes all belong to packed directories is common, and can
// be released (idle.go), even when a directory's node lies between every
// thousand files. Not a power of two: the division by the constant is a
// multiplication.
const slabChunk = 146

// slab hands out records of type T by index. Index 0 is never handed out,
// so that 0 can mean "none". Released records are zeroed and reused, the
// most recently released first.
//
// While a freeze is live (freeze.go) the chunks it holds are shared and
// never written again: mut copies a shared chunk before the first write
// to it, and reads (at) go straight to the chunk.
type slab[T any] struct {
	// chunks is the table of chunks the slab reads and writes; pages
	// holds the same chunks in pages of the table (paged_table.go), so
	// that a freeze copies one pointer per 1,024 chunks rather than the
	// table. A frozen view has pages only, until flatten makes its chunks.
	chunks  []*[slabChunk]T
	pages   pagedTable[*[slabChunk]T]
	gens    []uint32 // per chunk: the epoch at which it was made the live slab's own
	free    []uint32
	next    uint32 // the lowest index never handed out
	live    int
	epoch   uint32 // the engine's freeze epoch
	cow     uint32 // while a freeze is live: chunks with gens below it are shared; 0 otherwise
	freeGen uint32 // the epoch at which free was made the live slab's own

	// The node slab only: for each chunk released while every live node
	// in it belongs to a packed directory (idle.go), what is left of its
	// nodes; nil for a chunk in memory. A ghostChunk is never changed
	// once made, so a freeze shares it.
	ghosts pagedTable[*ghostChunk]

	// While a checkpoint loads: chunks made ahead on another goroutine
	// (load_ahead.go); nil otherwise.
	ahead *chunksAhead[T]
}

// newChunk appends a zeroed chunk, owned by the live slab.
func (s *slab[T]) newChunk() {
	var c *[slabChunk]T
	if s.ahead != nil {
		c = s.ahead.take()
	}
	if c == nil {
		c = new([slabChunk]T)
	}
	s.chunks = append(s.chunks, c)
	s.pages.push(c, s.epoch, s.cow)
	s.gens = append(s.gens, s.epoch)
}

// mut returns record i, which must have been handed out, for writing:
// the chunk it lies in is copied first if a live freeze shares it.
func (s *slab[T]) mut(i uint32) *T {
	c := i / slabChunk
	if s.gens[c] < s.cow {
		s.own(c)
	}
	return &s.chunks[c][i%slabChunk]
}

// own replaces shared chunk c by a copy that the live slab owns; the
// freeze keeps the old one.
func (s *slab[T]) own(c uint32) {
	own := *s.chunks[c]
	s.setChunk(c, &own)
	s.gens[c] = s.epoch
}

// setChunk makes v chunk c of the table and of its pages.
func (s *slab[T]) setChunk(c uint32, v *[slabChunk]T) {
	s.chunks[c] = v
	s.pages.set(c, v, s.epoch, s.cow)
}

// alloc returns a zeroed record and its index.
func (s *slab[T]) alloc() (uint32, *T) {
	var i uint32
	if k := len(s.free); k > 0 {
		i = s.free[k-1]
		s.free = s.free[:k-1]
	} else {
		if s.next == 0 {
			s.next = 1
		}
		i = s.next
		s.next++
		if int(i/slabChunk) == len(s.chunks) {
			s.newChunk()
		}
	}
	s.live++
	return i, s.mut(i)
}

// skip leaves the lowest record never handed out unused: a hole, which the
// caller puts in the free list. Load uses it to give a loaded engine the
// layout of the one that wrote the checkpoint.
func (s *slab[T]) skip() {
	if s.next == 0 {
		s.next = 1
	}
	i := s.next
	s.next++
	if int(i/slabChunk) == len(s.chunks) {
		s.newChunk()
	}
}

// at returns record i, which must have been handed out, for reading only
// (mut is for writing).
func (s *slab[T]) at(i uint32) *T { return &s.chunks[i/slabChunk][i%slabChunk] }

// release zeroes record i and makes it available again.
func (s *slab[T]) release(i uint32) {
	var zero T
	*s.mut(i) = zero
	if s.freeGen < s.cow {
		// A live freeze holds the free list: appending could write
		// over the slots it has and this slab popped since.
		s.free = slices.Clone(s.free)
		s.freeGen = s.epoch
	}
	s.free = append(s.free, i)
	s.live--
}

// store is the engine's nodes: the node slab, the index by inode number,
// and the extra records.
type store struct {
	nodes   slab[node]
	extras  slab[extra]
	singles slab[single]
	index   inoIndex
	owners  owners
	idle    idleState // the idle sweep and the packed directories; see idle.go
}

// get returns the node ino, or nil, for writing (see slab.mut). A node
// kept in a packed directory is inflated with its directory first.
func (s *store) get(ino Ino) *node {
	slot := s.index.find(ino, &s.nodes)
	if slot == 0 {
		return nil
	}
	return s.atSlot(slot)
}

// peek returns the node ino, or nil, for reading only. A node kept in a
// packed directory is inflated with its directory first, or, while the
// store is read only (a frozen view, Check, the encoder), read from the
// packed directory without changing anything.
func (s *store) peek(ino Ino) *node {
	slot := s.index.find(ino, &s.nodes)
	if slot == 0 {
		return nil
	}
	return s.peekSlot(slot)
}

// atSlot returns the node in slot, which must be live, for writing.
func (s *store) atSlot(slot uint32) *node {
	if s.ghostAt(slot) {
		s.wake(slot)
	}
	return s.nodes.mut(slot)
}

// peekSlot returns the node in slot for reading only; a free slot reads
// as a zero node.
func (s *store) peekSlot(slot uint32) *node {
	c := s.nodes.chunks[slot/slabChunk]
	if c == nil || c[slot%slabChunk].Mode == 0 {
		return s.peekGhost(slot)
	}
	return &c[slot%slabChunk]
}

// inoAt returns the inode number of the node in slot (0: free), without
// inflating anything.
func (s *store) inoAt(slot uint32) Ino { return slotIno(&s.nodes, slot) }

// slotIno returns the inode number of the node in slot i of nodes, 0 for a
// free slot, whether its chunk is in memory or released.
func slotIno(nodes *slab[node], i uint32) Ino {
	if c := nodes.chunks[i/slabChunk]; c != nil {
		return c[i%slabChunk].Ino
	}
	return nodes.ghosts.at(i / slabChunk).ino[i%slabChunk]
}

// slotOf returns the slot of the node ino, or 0.
func (s *store) slotOf(ino Ino) uint32 { return s.index.find(ino, &s.nodes) }

// add returns a new node with inode number ino, which must be unused, and
// its slot; its owner is root.
func (s *store) add(ino Ino) (uint32, *node) {
	if k := len(s.nodes.free); k > 0 {
		s.materialize(s.nodes.free[k-1] / slabChunk)
	}
	slot, n := s.nodes.alloc()
	n.Ino = ino
	s.owners.ref(0, 0)
	s.index.insert(ino, slot, &s.nodes)
	return slot, n
}

// remove releases the node ino and its extra record.
func (s *store) remove(ino Ino) {
	slot := s.index.find(ino, &s.nodes)
	if slot == 0 {
		return
	}
	n := s.atSlot(slot)
	s.index.remove(ino, &s.nodes)
	s.owners.unref(n.own)
	s.dropSingle(n)
	if n.aux != 0 {
		s.extras.release(n.aux)
	}
	s.nodes.release(slot)
}

// len returns the number of nodes.
func (s *store) len() int { return s.nodes.live }

// extraOf returns n's extra record, or nil if it has none, for reading
// only: extraMut is for changing the record or what it points to.
func (s *store) extraOf(n *node) *extra {
	if n.aux == 0 || n.aux&singleBit != 0 {
		return nil
	}
	return s.extras.at(n.aux)
}

// extraMut returns n's extra record, or nil if it has none, for writing:
// the record and its directory entries, xattrs and file data are no
// longer shared with a live freeze (see freeze.go).
func (s *store) extraMut(n *node) *extra {
	if n.aux == 0 || n.aux&singleBit != 0 {
		return nil
	}
	return s.extraMutAt(n.aux)
}

// extraMutAt is extraMut for the extra record i.
func (s *store) extraMutAt(i uint32) *extra {
	x := s.extras.mut(i)
	if x.gen < s.extras.cow {
		x.unshare(s.extras.epoch)
	}
	return x
}

// singleOf returns n's single, or nil if it has none.
func (s *store) singleOf(n *node) *single {
	if n.aux&singleBit == 0 {
		return nil
	}
	return s.singles.at(n.aux &^ singleBit)
}

// dropSingle releases n's single, if any; the slice is forgotten.
func (s *store) dropSingle(n *node) {
	if n.aux&singleBit != 0 {
		s.singles.release(n.aux &^ singleBit)
		n.aux = 0
	}
}

// settle moves the data of a file whose extra record holds nothing but one
// slice into a single, and releases the extra record.
func (s *store) settle(n *node) {
	x := s.extraOf(n)
	if x == nil || x.file == nil || x.dir != nil || x.target != "" || x.xattrs != nil || x.rdev != 0 {
		return
	}
	cs := x.file.chunks
	if len(cs) != 1 || len(cs[0].slices) != 1 {
		return
	}
	s.extras.release(n.aux)
	i, one := s.singles.alloc()
	*one = single{slice: cs[0].slices[0], chunk: cs[0].idx}
	n.aux = i | singleBit
}

// extra returns n's extra record, adding an empty one if it has none. A
// single is moved into the new record's file data.
func (s *store) extra(n *node) *extra {
	if one := s.singleOf(n); one != nil {
		cs := []chunk{{idx: one.chunk, slices: []Slice{one.slice}}}
		s.dropSingle(n)
		x := s.extra(n)
		x.file = &fileData{chunks: cs}
		return x
	}
	if n.aux == 0 {
		var x *extra
		n.aux, x = s.extras.alloc()
		x.gen = s.extras.epoch
		return x
	}
	return s.extraMutAt(n.aux)
}

// dropExtraIfEmpty releases n's extra record once nothing is left in it,
// or nothing but one slice (which moves to a single).
func (s *store) dropExtraIfEmpty(n *node) {
	x := s.extraOf(n)
	if x != nil && x.empty() {
		s.extras.release(n.aux)
		n.aux = 0
	}
	s.settle(n)
}

// all yields every node with its inode number, in slot order, for
// reading only. Nodes kept in packed directories are read from them,
// without inflating anything: the store is read only meanwhile.
func (s *store) all() iter.Seq2[Ino, *node] {
	return func(yield func(Ino, *node) bool) {
		s.beginRO()
		defer s.endRO()
		for c, chunk := range s.nodes.chunks {
			if chunk == nil {
				g := s.nodes.ghosts.at(uint32(c))
				for i, ino := range g.ino {
					if ino != 0 && !yield(ino, s.ghostCopy(uint32(c*slabChunk+i))) {
						return
					}
				}
				continue
			}
			for i := range chunk {
				n := &chunk[i]
				if n.Ino == 0 {
					continue
				}
				if n.Mode == 0 {
					n = s.ghostCopy(uint32(c*slabChunk + i))
				}
				if !yield(n.Ino, n) {
					return
				}
			}
		}
	}
}

// inoIndex maps inode numbers to slots: linear probing over a power-of-two
// array of slots (0: empty), with the key read from the node record, so a
// bucket costs 4 bytes. Deletion shifts later entries back, so there are
// no tombstones.
type inoIndex struct {
	slots []uint32
	count int
	shift uint8 // 64 - log2(len(slots))
}

// maxIndexLoad is the fill, in 1/16ths, past which the index doubles.
const maxIndexLoad = 13

func (x *inoIndex) home(ino Ino) int {
	return int((uint64(ino) * 0x9E3779B97F4A7C15) >> x.shift)
}

func (x *inoIndex) find(ino Ino, nodes *slab[node]) uint32 {
	if x.count == 0 {
		return 0
	}
	mask := len(x.slots) - 1
	for i := x.home(ino); ; i = (i + 1) & mask {
		slot := x.slots[i]
		if slot == 0 {
			return 0
		}
		if slotIno(nodes, slot) == ino {
			return slot
		}
	}
}

func (x *inoIndex) insert(ino Ino, slot uint32, nodes *slab[node]) {
	if (x.count+1)*16 > len(x.slots)*maxIndexLoad {
		x.grow(nodes)
	}
	mask := len(x.slots) - 1
	i := x.home(ino)
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = slot
	x.count++
}

func (x *inoIndex) grow(nodes *slab[node]) {
	size := max(64, 2*len(x.slots))
	old := x.slots
	x.slots = make([]uint32, size)
	x.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	mask := size - 1
	for _, slot := range old {
		if slot == 0 {
			continue
		}
		i := x.home(slotIno(nodes, slot))
		for x.slots[i] != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = slot
	}
}

// remove deletes ino from the index and returns its slot (0 if absent).
func (x *inoIndex) remove(ino Ino, nodes *slab[node]) uint32 {
	if x.count == 0 {
		return 0
	}
	mask := len(x.slots) - 1
	i := x.home(ino)
	for {
		slot := x.slots[i]
		if slot == 0 {
			return 0
		}
		if slotIno(nodes, slot) == ino {
			break
		}
		i = (i + 1) & mask
	}
	found := x.slots[i]
	// Backward shift: move up every later entry of the run that may sit
	// at the hole, so that lookups never stop short.
	for j := (i + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		h := x.home(slotIno(nodes, x.slots[j]))
		if (j-h)&mask >= (j-i)&mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = 0
	x.count--
	return found
}
