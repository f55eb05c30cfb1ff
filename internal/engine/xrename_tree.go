package engine

// Directories moving between partitions. A rename across partitions
// (xrename.go) of a directory moves its whole subtree as one image: a
// tree of XNode, each directory's entries in name order. The subtree
// moves only if every node in it could move alone (one link, not open,
// its slices its own), and none of its directories is the root of a
// directory quota, has snapshots, is a mount point of the namespace
// (the router names them: busy) or holds an entry a rename across
// partitions has prepared; and it has at most MaxMoveNodes nodes. A
// larger subtree is refused with EXDEV, which programs such as mv(1)
// answer by copying.

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
)

// MaxMoveNodes bounds the nodes of a directory's subtree that one rename
// across partitions moves: its image travels in one call and one log
// record (at most 16 MiB).
const MaxMoveNodes = 10_000

// maxMoveImage bounds the bytes of a moving subtree's image, as
// imageCost estimates them (the inline bytes of its small files
// included): the image travels in one call and one log record, of at
// most 16 MiB.
const maxMoveImage = 8 << 20

// maxMoveDepth bounds the depth of an image's tree.
const maxMoveDepth = 1024

// xDirFlag marks, in a target intent's flags, that a directory arrives:
// an empty directory it replaces is pinned (nothing may be made in it)
// until the intent goes.
const xDirFlag = 1 << 31

// XEntry is one entry of a moving directory.
type XEntry struct {
	Name string
	Node *XNode
}

// XSize is what a moving node's subtree counts: its nodes (itself
// included) and their bytes as a directory quota counts them.
type XSize struct {
	Nodes, Bytes uint64
}

// isDir reports whether img is a directory's.
func (img *XNode) isDir() bool { return img.Attr.Mode&S_IFMT == S_IFDIR }

// AllChunks returns the chunks of every file of img's tree.
func (img *XNode) AllChunks() []XChunk {
	if !img.isDir() {
		return img.Chunks
	}
	var out []XChunk
	img.walk(func(n *XNode) { out = append(out, n.Chunks...) })
	return out
}

// walk calls fn for img and every node below it, parents first.
func (img *XNode) walk(fn func(*XNode)) {
	fn(img)
	for _, ent := range img.Entries {
		ent.Node.walk(fn)
	}
}

// movableTree checks that directory top and everything below it can move
// to another partition, and returns what the subtree counts. busy holds
// the mount points of the namespace in this partition.
func (e *Engine) movableTree(top *node, busy []Ino) (XSize, error) {
	var size XSize
	parents := make(map[Ino]bool)
	for _, in := range e.xr.list {
		if in.State == XPrepared {
			parents[in.Parent] = true
		}
	}
	snaps := e.snaps()
	cost := 0
	var walk func(d *node, depth int) error
	walk = func(d *node, depth int) error {
		size.Nodes++
		size.Bytes += bytesOf(d)
		cost += e.imageCost(d)
		switch {
		case size.Nodes > MaxMoveNodes:
			return fmt.Errorf("directory %d: more than %d nodes below it: %w", top.Ino, MaxMoveNodes, syscall.EXDEV)
		case depth > maxMoveDepth:
			return fmt.Errorf("directory %d: deeper than %d: %w", top.Ino, maxMoveDepth, syscall.EXDEV)
		case slices.Contains(busy, d.Ino):
			return fmt.Errorf("directory %d: a mount point: %w", d.Ino, syscall.EBUSY)
		case parents[d.Ino] || e.pinned(d.Ino):
			return fmt.Errorf("directory %d: a rename across partitions in it: %w", d.Ino, syscall.EBUSY)
		}
		if _, ok := e.quota.dirs[d.Ino]; ok {
			return fmt.Errorf("directory %d: the root of a directory quota: %w", d.Ino, syscall.EXDEV)
		}
		if _, ok := snaps.dirs[d.Ino]; ok {
			return fmt.Errorf("directory %d: has snapshots: %w", d.Ino, syscall.EXDEV)
		}
		var err error
		e.entries(d).each(func(_ []byte, slot uint32) bool {
			n := e.peekAt(slot)
			if n.isDir() {
				err = walk(n, depth+1)
			} else {
				size.Nodes++
				size.Bytes += bytesOf(n)
				err = e.movable(n)
				if cost += e.imageCost(n); err == nil && cost > maxMoveImage {
					err = fmt.Errorf("directory %d: an image of more than %d bytes: %w", top.Ino, maxMoveImage, syscall.EXDEV)
				}
			}
			return err == nil
		})
		return err
	}
	return size, walk(top, 0)
}

// imageCost estimates the bytes n adds to an image: its attributes and
// name, symlink target, xattrs, slices and inline bytes.
func (e *Engine) imageCost(n *node) int {
	cost := 64 + MaxNameLen
	if x := e.st.extraOf(n); x != nil {
		cost += len(x.target)
		for k, v := range x.xattrs {
			cost += len(k) + len(v) + 8
		}
	}
	if n.Mode&S_IFMT == S_IFREG {
		for _, ch := range e.chunks(n) {
			cost += 8 + 32*len(ch.slices)
		}
		cost += e.fileInlineBytes(n)
	}
	return cost
}

// movableAny checks that n (a directory with its subtree, or not) can
// move to another partition, and returns what it counts.
func (e *Engine) movableAny(n *node, busy []Ino) (XSize, error) {
	if n.isDir() {
		return e.movableTree(n, busy)
	}
	return XSize{Nodes: 1, Bytes: bytesOf(n)}, e.movable(n)
}

// treeImageOf returns the image of n with, for a directory, its subtree.
func (e *Engine) treeImageOf(n *node) *XNode {
	img := e.imageOf(n)
	if !n.isDir() {
		return img
	}
	img.Chunks = nil
	e.entries(n).each(func(name []byte, slot uint32) bool {
		img.Entries = append(img.Entries, XEntry{Name: string(name), Node: e.treeImageOf(e.peekAt(slot))})
		return true
	})
	slices.SortFunc(img.Entries, func(a, b XEntry) int { return strings.Compare(a.Name, b.Name) })
	return img
}

// departTree frees n and, for a directory, its subtree, children first,
// without dropping slices: partition to holds them now, and each freed
// number keeps a tombstone naming it (forward.go). The caller removed
// n's entry.
func (e *Engine) departTree(n *node, to uint16) {
	e.tombstone(n.Ino, to)
	if !n.isDir() {
		e.depart(n)
		return
	}
	var below []uint32
	e.entries(n).each(func(_ []byte, slot uint32) bool {
		below = append(below, slot)
		return true
	})
	for _, slot := range below {
		e.departTree(e.at(slot), to)
	}
	if e.quota.dirs != nil || e.ownerQuotasOn() {
		e.quotaGone(n)
	}
	n.Nlink = 0
	delete(e.opens, n.Ino)
	e.st.remove(n.Ino)
}

// arriveTree makes the nodes of image img in directory d, which the
// caller links once, and returns the top's slot. Each node's number at
// the source, if the image has it, becomes an alias of its new one
// (forward.go).
func (e *Engine) arriveTree(d *node, img *XNode, now int64) uint32 {
	if !img.isDir() {
		slot := e.arrive(d, img, now)
		e.alias(img.Attr.Ino, e.peekAt(slot).Ino)
		return slot
	}
	slot, n := e.st.add(e.alloc())
	e.alias(img.Attr.Ino, n.Ino)
	a := &img.Attr
	n.Mode, n.Nlink, n.Size = a.Mode, 2, dirSize
	e.setOwner(n, a.UID, a.GID)
	x := e.st.extra(n)
	x.parent = d.Ino
	x.dir = &dirents{}
	if len(img.Xattrs) > 0 {
		x.xattrs = make(map[string][]byte, len(img.Xattrs))
		for _, xa := range img.Xattrs {
			x.xattrs[xa.Name] = slices.Clone(xa.Value)
		}
	}
	e.quotaCreated(e.regionOf(d), n)
	subdirs := uint32(0)
	for _, ent := range img.Entries {
		child := e.arriveTree(e.at(slot), ent.Node, now)
		e.entriesMut(e.at(slot)).add(ent.Name, child)
		if ent.Node.isDir() {
			subdirs++
		}
	}
	n = e.at(slot) // the store may have moved it
	n.Nlink += subdirs
	n.Atime, n.Mtime, n.Ctime = a.Atime, a.Mtime, now
	return slot
}

// checkTree checks the image of a directory and everything below it, and
// counts its nodes into count.
func checkTree(img *XNode, depth int, count *int) error {
	*count++
	switch {
	case *count > MaxMoveNodes:
		return fmt.Errorf("image of more than %d nodes: %w", MaxMoveNodes, syscall.EINVAL)
	case depth > maxMoveDepth:
		return fmt.Errorf("image deeper than %d: %w", maxMoveDepth, syscall.EINVAL)
	}
	if !img.isDir() {
		return checkNodeImage(img)
	}
	if len(img.Chunks) > 0 || len(img.Inline) > 0 || img.Target != "" || img.Attr.Rdev != 0 {
		return fmt.Errorf("directory image with content: %w", syscall.EINVAL)
	}
	if err := checkXattrs(img.Xattrs); err != nil {
		return err
	}
	for i, ent := range img.Entries {
		if ent.Node == nil || checkSyntax(ent.Name) != nil || checkLen(ent.Name) != nil || isDot(ent.Name) ||
			i > 0 && img.Entries[i-1].Name >= ent.Name {
			return fmt.Errorf("directory image entry %q: %w", ent.Name, syscall.EINVAL)
		}
		if err := checkTree(ent.Node, depth+1, count); err != nil {
			return err
		}
	}
	return nil
}

// eachBelow calls fn for every node below directory d, parents first.
func (e *Engine) eachBelow(d *node, fn func(*node)) {
	e.entries(d).each(func(_ []byte, slot uint32) bool {
		n := e.peekAt(slot)
		fn(n)
		if n.isDir() {
			e.eachBelow(n, fn)
		}
		return true
	})
}

// dropInlineBelow forgets the inline bytes of the slices of n and, for a
// directory, of every file below it: a subtree that has left for another
// partition (which was sent them), unless a file here still shares them.
func (e *Engine) dropInlineBelow(n *node) {
	drop := func(f *node) {
		for _, ch := range e.chunks(f) {
			for _, s := range ch.slices {
				if e.shared[s.ID] == 0 {
					e.dropInline(s.ID)
				}
			}
		}
	}
	drop(n)
	if n.isDir() {
		e.eachBelow(n, drop)
	}
}

// size counts img's tree as XSize does: its nodes and their quota bytes.
func (img *XNode) size() XSize {
	var s XSize
	img.walk(func(n *XNode) {
		s.Nodes++
		if n.Attr.Mode&S_IFMT == S_IFREG { // as bytesOf
			s.Bytes += n.Attr.Size
		}
	})
	return s
}
