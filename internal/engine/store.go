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

// slabChunkBits sets the records per slab chunk: 4096 nodes make a 256 KiB
// chunk, large enough that chunks are few and small enough that the last,
// partly used one wastes little.
const slabChunkBits = 12

const slabChunk = 1 << slabChunkBits

// slab hands out records of type T by index. Index 0 is never handed out,
// so that 0 can mean "none". Released records are zeroed and reused, the
// most recently released first.
type slab[T any] struct {
	chunks [][]T
	free   []uint32
	next   uint32 // the lowest index never handed out
	live   int
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
		if int(i>>slabChunkBits) == len(s.chunks) {
			s.chunks = append(s.chunks, make([]T, slabChunk))
		}
	}
	s.live++
	return i, s.at(i)
}

// at returns record i, which must have been handed out.
func (s *slab[T]) at(i uint32) *T { return &s.chunks[i>>slabChunkBits][i&(slabChunk-1)] }

// release zeroes record i and makes it available again.
func (s *slab[T]) release(i uint32) {
	var zero T
	*s.at(i) = zero
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
}

// get returns the node ino, or nil.
func (s *store) get(ino Ino) *node {
	slot := s.index.find(ino, &s.nodes)
	if slot == 0 {
		return nil
	}
	return s.nodes.at(slot)
}

// slotOf returns the slot of the node ino, or 0.
func (s *store) slotOf(ino Ino) uint32 { return s.index.find(ino, &s.nodes) }

// add returns a new node with inode number ino, which must be unused, and
// its slot; its owner is root.
func (s *store) add(ino Ino) (uint32, *node) {
	slot, n := s.nodes.alloc()
	n.Ino = ino
	s.owners.ref(0, 0)
	s.index.insert(ino, slot, &s.nodes)
	return slot, n
}

// remove releases the node ino and its extra record.
func (s *store) remove(ino Ino) {
	slot := s.index.remove(ino, &s.nodes)
	if slot == 0 {
		return
	}
	n := s.nodes.at(slot)
	s.owners.unref(n.own)
	s.dropSingle(n)
	if n.aux != 0 {
		s.extras.release(n.aux)
	}
	s.nodes.release(slot)
}

// len returns the number of nodes.
func (s *store) len() int { return s.nodes.live }

// extraOf returns n's extra record, or nil if it has none.
func (s *store) extraOf(n *node) *extra {
	if n.aux == 0 || n.aux&singleBit != 0 {
		return nil
	}
	return s.extras.at(n.aux)
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
		return x
	}
	return s.extras.at(n.aux)
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

// all yields every node with its inode number, in slot order.
func (s *store) all() iter.Seq2[Ino, *node] {
	return func(yield func(Ino, *node) bool) {
		for _, chunk := range s.nodes.chunks {
			for i := range chunk {
				if n := &chunk[i]; n.Ino != 0 && !yield(n.Ino, n) {
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
		if nodes.at(slot).Ino == ino {
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
		i := x.home(nodes.at(slot).Ino)
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
		if nodes.at(slot).Ino == ino {
			break
		}
		i = (i + 1) & mask
	}
	found := x.slots[i]
	// Backward shift: move up every later entry of the run that may sit
	// at the hole, so that lookups never stop short.
	for j := (i + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		h := x.home(nodes.at(x.slots[j]).Ino)
		if (j-h)&mask >= (j-i)&mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = 0
	x.count--
	return found
}
