package engine

import (
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"syscall"
)

// The copy of a subtree that clones and snapshots share: a metadata copy
// in which every node of the subtree gets a new node with its attributes,
// entries, symlink target, device number, xattrs (ACLs included) and
// chunk layout, while the file data stays where it is: every slice the
// copy places counts one more use in the engine's shared map, so that it
// becomes garbage only when neither the source nor the copy uses it, and
// a write to either makes new slices (copy on write) without touching the
// other's.
//
// A copy runs in two passes. The plan walks the source, read only, and
// lists its nodes in the order they will be made: breadth first, each
// directory's entries by node slot (slots are part of the replicated
// state; the order entries sit in a directory's buffer is not, since the
// idle sweep, which runs on each replica at its own times, rewrites it).
// It counts what the copy will hold, so that the quotas and the inode
// allocator are checked before anything changes. The second pass makes
// the nodes, with inode numbers handed out in plan order, so that one
// copy's nodes have consecutive numbers: a snapshot's nodes are the range
// of numbers its copy took.
//
// Like all of the engine, a copy runs on the engine's owner goroutine.

// copyItem is one entry of the source to copy: the source node's slot,
// the plan index of the directory it goes into (-1 for the copy's root)
// and the offset of its entry in the source directory's buffer (no
// pointer: a plan of a million items costs the collector nothing).
type copyItem struct {
	slot   uint32
	parent int32
	off    uint32
}

// copyPlan is what the first pass finds.
type copyPlan struct {
	items  []copyItem
	nodes  uint64            // distinct nodes, the root included
	bytes  uint64            // sizes of the regular files, each node once
	slices int               // slice placements of the files, each node once
	dirBuf []int             // per plan index of a directory: bytes of the entries it gets
	bufs   [][]byte          // per plan index of a directory: the source directory's entry buffer
	name   string            // the copy's root's name
	links  map[uint32]uint32 // source slot of a non-directory with several links -> entries naming it in the subtree
}

// copyOpts says how a copy is made.
type copyOpts struct {
	c         Cred // the caller: without root, every directory must be readable and searchable and every file readable (EACCES)
	keepOwner bool // the copy keeps the source's owners; otherwise the caller owns it (and set-id bits of non-directories go)
	skip      Ino  // a directory of the source not copied (the snapshot area, when the source is the root)
}

// planCopy walks the subtree at src, whose entry in the copy is name.
func (e *Engine) planCopy(src *node, name string, o copyOpts) (*copyPlan, error) {
	p := &copyPlan{name: name}
	rootSlot := e.st.slotOf(src.Ino)
	p.items = append(p.items, copyItem{slot: rootSlot, parent: -1})
	var err error
	for i := 0; i < len(p.items) && err == nil; i++ {
		n := e.peekAt(p.items[i].slot)
		if err = e.mayCopy(o.c, n); err != nil {
			return nil, err
		}
		if e.pinned(n.Ino) {
			// The target of an exchange across partitions, about to
			// leave: a copy sharing its slices would share them with
			// another partition.
			return nil, fmt.Errorf("node %d is moving: %w", n.Ino, syscall.EBUSY)
		}
		if !n.isDir() {
			if n.Nlink > 1 {
				if p.links == nil {
					p.links = make(map[uint32]uint32)
				}
				k := p.links[p.items[i].slot]
				p.links[p.items[i].slot] = k + 1
				if k > 0 {
					continue // counted at its first entry
				}
			}
			p.nodes++
			p.bytes += bytesOf(n)
			if e.st.singleOf(n) != nil {
				p.slices++
			} else if x := e.st.extraOf(n); x != nil && x.file != nil {
				for _, ch := range x.file.chunks {
					p.slices += len(ch.slices)
				}
			}
			continue
		}
		p.nodes++
		first := len(p.items)
		size := 0
		de := e.entries(n) // inflated: its buffer holds the entries
		for off := 0; off < len(de.buf); off = de.next(off) {
			slot := de.slotAt(off)
			if slot == 0 || o.skip != 0 && e.st.inoAt(slot) == o.skip {
				continue
			}
			p.items = append(p.items, copyItem{slot: slot, parent: int32(i), off: uint32(off)})
			size += entHeader + int(de.buf[off+4])
		}
		for len(p.dirBuf) <= i {
			p.dirBuf = append(p.dirBuf, 0)
			p.bufs = append(p.bufs, nil)
		}
		p.dirBuf[i], p.bufs[i] = size, de.buf
		kids := p.items[first:]
		slices.SortFunc(kids, func(a, b copyItem) int { return int(a.slot) - int(b.slot) })
	}
	return p, err
}

// mayCopy checks that c may copy n: root may copy anything; anyone else
// needs to read and search every directory and read every regular file.
func (e *Engine) mayCopy(c Cred, n *node) error {
	if c.IsRoot() {
		return nil
	}
	switch n.Mode & S_IFMT {
	case S_IFDIR:
		return e.access(c, n, mayRead|mayExec)
	case S_IFREG:
		return e.access(c, n, mayRead)
	}
	return nil
}

// checkCopy checks that the plan's nodes fit in the inode numbers left,
// under the quotas over directory d (returning the nearest of them) and,
// when the caller is to own the copy, under the caller's user and group
// quotas. A copy that keeps the source's owners counts for them without
// a check, as root's writes do.
func (e *Engine) checkCopy(p *copyPlan, d *node, o copyOpts) (Ino, error) {
	if e.next+p.nodes >= 1<<localBits {
		return 0, syscall.ENOSPC
	}
	q := e.regionOf(d)
	if err := e.quotaCheck(q, p.nodes, p.bytes); err != nil {
		return 0, fmt.Errorf("copy of %d nodes and %d bytes: %w", p.nodes, p.bytes, err)
	}
	if e.ownerQuotasOn() && !o.keepOwner {
		var od ownerDelta
		od.node(e, o.c.UID, o.c.GID, int64(p.nodes), p.bytes)
		if err := od.check(e); err != nil {
			return 0, fmt.Errorf("copy of %d nodes and %d bytes for %d:%d: %w", p.nodes, p.bytes, o.c.UID, o.c.GID, err)
		}
	}
	return q, nil
}

// makeCopy runs the plan into directory d, at time now, and returns the
// copy's root. q is the nearest quota over d (checkCopy). d's entry for
// the root is added last, so a copy into its own source never meets
// itself; d's times change as for any new entry.
func (e *Engine) makeCopy(p *copyPlan, d *node, q Ino, o copyOpts, now int64) *node {
	copies := make([]uint32, len(p.items)) // plan index -> slot of the copy
	dents := make([]*dirents, len(p.dirBuf))
	var linked map[uint32]uint32 // source slot -> copy slot, for nodes with several links
	if p.links != nil {
		linked = make(map[uint32]uint32, len(p.links))
	}
	if len(e.shared) < p.slices {
		// Grown once rather than step by step as the copy's uses come.
		grown := make(map[uint64]uint32, len(e.shared)+p.slices)
		for id, k := range e.shared {
			grown[id] = k
		}
		e.shared = grown
	}
	e.st.index.growFor(int(p.nodes), &e.st.nodes)
	for i := range p.items {
		it := &p.items[i]
		var parent Ino
		if it.parent >= 0 {
			parent = e.st.inoAt(copies[it.parent])
		} else {
			parent = d.Ino
		}
		src := e.peekAt(it.slot)
		if k, ok := p.links[it.slot]; ok {
			if slot, done := linked[it.slot]; done {
				copies[i] = slot
				dents[it.parent].loadEntry(p.nameOf(it), slot)
				continue
			}
			slot := e.copyNode(src, parent, q, o)
			e.at(slot).Nlink = k
			linked[it.slot] = slot
			copies[i] = slot
		} else {
			copies[i] = e.copyNode(src, parent, q, o)
		}
		if i < len(dents) && p.dirBuf[i] > 0 {
			// A new directory's entries, appended as a checkpoint's are
			// and indexed once at the end.
			x := e.st.extraOf(e.at(copies[i]))
			x.dir.buf = make([]byte, 0, p.dirBuf[i])
			dents[i] = x.dir
		}
		if it.parent < 0 {
			continue
		}
		dents[it.parent].loadEntry(p.nameOf(it), copies[i])
		if src.isDir() {
			e.at(copies[it.parent]).Nlink++
		}
	}
	for _, dd := range dents {
		if dd != nil {
			dd.reindex()
		}
	}
	root := e.at(copies[0])
	e.addEntry(d, p.name, copies[0], now)
	if root.isDir() {
		d.Nlink++
	}
	e.used += p.bytes
	if q != 0 {
		e.quotaAdd(q, int64(p.nodes), int64(p.bytes))
	}
	return root
}

// copyNode makes the copy of node src, to go into directory parent, and
// returns its slot. A directory starts with link count 2 and no entries.
func (e *Engine) copyNode(src *node, parent Ino, q Ino, o copyOpts) uint32 {
	s := *src // st.add below may move the chunk src is read from (a live freeze)
	sx := e.st.extraOf(src)
	one := e.st.singleOf(src)
	slot, n := e.st.add(e.alloc())
	n.Size, n.Atime, n.Mtime, n.Ctime = s.Size, s.Atime, s.Mtime, s.Ctime
	n.Mode, n.Nlink = s.Mode, 1
	switch {
	case !o.keepOwner:
		e.setOwner(n, o.c.UID, o.c.GID)
		if !n.isDir() {
			n.Mode &^= S_ISUID | S_ISGID
		}
	case s.own != 0:
		// The source's pair, counted once more (st.add counted root's).
		e.st.owners.refs[s.own]++
		e.st.owners.unref(0)
		n.own = s.own
	}
	if one != nil {
		i, c := e.st.singles.alloc()
		*c = *one
		n.aux = i | singleBit
		e.shared[c.slice.ID]++
	}
	if sx != nil {
		x := e.st.extra(n)
		x.target, x.rdev = sx.target, sx.rdev
		if sx.xattrs != nil {
			x.xattrs = maps.Clone(sx.xattrs) // values are replaced, never changed in place
		}
		if sx.file != nil {
			cs := slices.Clone(sx.file.chunks)
			for k := range cs {
				cs[k].slices = slices.Clone(cs[k].slices)
				for _, sl := range cs[k].slices {
					e.shared[sl.ID]++
				}
			}
			x.file = &fileData{chunks: cs}
		}
		if s.isDir() {
			n.Nlink = 2
			x.dir = &dirents{}
			x.parent = parent
		}
	}
	if !n.isDir() {
		e.setRegion(n, q) // the source's region may be another quota's
	}
	e.ownerCreated(n)
	return slot
}

// growFor grows the index, at once, to hold n more entries without
// growing again.
func (x *inoIndex) growFor(n int, nodes *slab[node]) {
	size := max(64, len(x.slots))
	for (x.count+n+1)*16 > size*maxIndexLoad {
		size *= 2
	}
	if size == len(x.slots) {
		return
	}
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

// nameOf returns the name of item it (not the root), in its source
// directory's buffer.
func (p *copyPlan) nameOf(it *copyItem) []byte {
	buf := p.bufs[it.parent]
	n := int(buf[it.off+4])
	return buf[int(it.off)+entHeader : int(it.off)+entHeader+n]
}
