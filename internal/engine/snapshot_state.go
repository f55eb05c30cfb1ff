package engine

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"syscall"
)

// Snapshots are read-only copies of a directory's subtree (clone_copy.go),
// kept in a hidden area of the partition's root:
//
//	/.snapshots/<dir>/<name>
//
// where <dir> is the decimal inode number of the directory the snapshot
// was taken of. A lookup of ".snapshot" in a directory that has snapshots
// answers /.snapshots/<dir>, so that every snapshot reads at
// PATH/.snapshot/NAME through any interface; a directory without
// snapshots has no ".snapshot". The area and everything in it is read
// only: every change fails with EROFS, except the snapshot operations.
//
// A snapshot's nodes are the inode numbers its copy handed out, one
// consecutive range (inode numbers are never reused), so telling whether
// a node is read only is a search in the few ranges, wherever the change
// names it from (a path, an inode number, a descriptor). The ranges and
// the area's directories are derived from the tree (snapScan), once,
// before the first change that needs them, and kept up to date by the
// snapshot operations; they are not in checkpoints, which hold the tree.
//
// snapState belongs to the engine's owner goroutine: only changes read
// it. Lookups of ".snapshot", which a frozen view also answers from other
// goroutines, read the tree instead (snapArea).

// Names of the snapshot area.
const (
	// SnapshotArea is the hidden directory in the root of each partition
	// that holds the snapshots. No other entry of the root may take the
	// name (EPERM).
	SnapshotArea = ".snapshots"
	// SnapshotDir is the name under which a directory shows its snapshots.
	SnapshotDir = ".snapshot"
)

// snapState is what the engine keeps of the snapshots.
type snapState struct {
	ready  bool        // derived from the tree since the engine was made or loaded
	area   Ino         // /.snapshots; 0 when there is none
	dirs   map[Ino]Ino // source directory -> its directory in the area
	areas  map[Ino]Ino // directory in the area -> source directory
	ranges []snapRange // sorted by lo
	roots  map[Ino]int // a snapshot's root -> its range's index; rebuilt with ranges
}

// snapRange is one snapshot's nodes: the inode numbers lo to hi, and the
// bytes of its regular files.
type snapRange struct {
	lo, hi Ino
	bytes  uint64
}

// snaps returns the snapshot state, deriving it from the tree the first
// time.
func (e *Engine) snaps() *snapState {
	if !e.snap.ready {
		s, err := e.snapScan()
		if err != nil {
			// Check reports it; meanwhile nothing is read only but what
			// was found.
			s.ready = true
		}
		e.snap = s
	}
	return &e.snap
}

// snapScan derives the snapshot state from the tree.
func (e *Engine) snapScan() (snapState, error) {
	s := snapState{ready: true}
	root := e.st.peek(e.root)
	_, area := e.peekChild(root, SnapshotArea)
	if area == nil {
		return s, nil
	}
	if !area.isDir() {
		return s, fmt.Errorf("snapshots: %s is not a directory", SnapshotArea)
	}
	s.area = area.Ino
	s.dirs, s.areas = make(map[Ino]Ino), make(map[Ino]Ino)
	for _, dname := range e.sortedNames(area) {
		_, ad := e.peekChild(area, dname)
		src, err := strconv.ParseUint(dname, 10, 64)
		if err != nil || !ad.isDir() {
			return s, fmt.Errorf("snapshots: bad entry %q", dname)
		}
		s.dirs[Ino(src)] = ad.Ino
		s.areas[ad.Ino] = Ino(src)
		for _, name := range e.sortedNames(ad) {
			_, top := e.peekChild(ad, name)
			r, err := e.snapExtent(top)
			if err != nil {
				return s, fmt.Errorf("snapshot %s of %s: %w", name, dname, err)
			}
			s.ranges = append(s.ranges, r)
		}
	}
	s.sortRanges()
	return s, nil
}

// snapExtent walks the snapshot whose root is top and returns its range:
// its nodes must be exactly the inode numbers from top's on.
func (e *Engine) snapExtent(top *node) (snapRange, error) {
	r := snapRange{lo: top.Ino, hi: top.Ino}
	count := uint64(0)
	seen := map[Ino]bool{}
	queue := []*node{top}
	var err error
	visit := func(n *node) {
		if n.Ino < r.lo {
			err = fmt.Errorf("node %d below the snapshot's root %d", n.Ino, r.lo)
		}
		r.hi = max(r.hi, n.Ino)
		count++
		r.bytes += bytesOf(n)
	}
	visit(top)
	for len(queue) > 0 && err == nil {
		d := queue[0]
		queue = queue[1:]
		if !d.isDir() {
			continue
		}
		e.st.extraOf(d).dir.each(func(_ []byte, slot uint32) bool {
			n := e.peekAt(slot)
			if !n.isDir() && n.Nlink > 1 {
				if seen[n.Ino] {
					return true
				}
				seen[n.Ino] = true
			}
			visit(n)
			if n.isDir() {
				queue = append(queue, n)
			}
			return err == nil
		})
	}
	if err == nil && uint64(r.hi-r.lo)+1 != count {
		err = fmt.Errorf("%d nodes in the inode numbers %d to %d", count, r.lo, r.hi)
	}
	return r, err
}

// sortRanges sorts the ranges and indexes them by root.
func (s *snapState) sortRanges() {
	slices.SortFunc(s.ranges, func(a, b snapRange) int { return cmpIno(a.lo, b.lo) })
	s.roots = make(map[Ino]int, len(s.ranges))
	for i, r := range s.ranges {
		s.roots[r.lo] = i
	}
}

// inRange reports whether ino is a node of a snapshot.
func (s *snapState) inRange(ino Ino) bool {
	i := sort.Search(len(s.ranges), func(i int) bool { return s.ranges[i].hi >= ino })
	return i < len(s.ranges) && s.ranges[i].lo <= ino
}

// readOnly reports whether the node ino is in the snapshot area.
func (e *Engine) readOnly(ino Ino) bool {
	s := e.snaps()
	if s.area == 0 {
		return false
	}
	if ino == s.area {
		return true
	}
	if _, ok := s.areas[ino]; ok {
		return true
	}
	return s.inRange(ino)
}

// roCheck returns EROFS if any of the nodes is in the snapshot area.
func (e *Engine) roCheck(inos ...Ino) error {
	if e.snap.ready && e.snap.area == 0 {
		return nil
	}
	for _, ino := range inos {
		if ino != 0 && e.readOnly(ino) {
			return syscall.EROFS
		}
	}
	return nil
}

// entryCheck returns the error for a new entry name in directory d that
// the snapshots refuse: EROFS in the area, EPERM for the area's name in
// the root, EEXIST for ".snapshot" in a directory that has snapshots.
func (e *Engine) entryCheck(d *node, name string) error {
	if err := e.roCheck(d.Ino); err != nil {
		return err
	}
	if d.Ino == e.root && name == SnapshotArea {
		return syscall.EPERM
	}
	if name == SnapshotDir && e.hasSnapshots(d.Ino) {
		return syscall.EEXIST
	}
	return nil
}

// hasSnapshots reports whether directory dir has snapshots.
func (e *Engine) hasSnapshots(dir Ino) bool {
	s := e.snaps()
	_, ok := s.dirs[dir]
	return ok
}

// removeCheck returns the error for removing entry victim of directory d
// (or replacing it) that the snapshots refuse: EROFS in the area, EBUSY
// for a directory that has snapshots.
func (e *Engine) removeCheck(d, victim *node) error {
	if err := e.roCheck(d.Ino, victim.Ino); err != nil {
		return err
	}
	if victim.isDir() && e.hasSnapshots(victim.Ino) {
		return syscall.EBUSY // a bare errno, as every namespace call returns
	}
	return nil
}

// snapArea returns the directory that ".snapshot" of directory d names,
// or nil: read from the tree alone, for lookups.
func (e *Engine) snapArea(d *node) *node {
	root := e.st.peek(e.root)
	_, area := e.peekChild(root, SnapshotArea)
	if area == nil || !area.isDir() {
		return nil
	}
	_, ad := e.peekChild(area, strconv.FormatUint(uint64(d.Ino), 10))
	if ad == nil || !ad.isDir() {
		return nil
	}
	return ad
}

// renameSnapCheck returns the error for a rename of entry src of od to
// newName of nd (replacing dst, if not nil) that the snapshots refuse.
func (e *Engine) renameSnapCheck(od, src, nd *node, newName string, dst *node) error {
	if err := e.roCheck(od.Ino, src.Ino, nd.Ino); err != nil {
		return err
	}
	if dst != nil {
		return e.removeCheck(nd, dst)
	}
	return e.entryCheck(nd, newName)
}
