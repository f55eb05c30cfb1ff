package engine

import (
	"fmt"
	"strconv"
	"syscall"
)

// SnapshotInfo is one snapshot of a directory.
type SnapshotInfo struct {
	Name    string
	Dir     Ino   // the directory it was taken of
	Ino     Ino   // its root: PATH/.snapshot/NAME
	Created int64 // when it was taken (its root's ctime)
	Nodes   uint64
	Bytes   uint64 // sizes of its regular files (shared with whatever still names the same data)
}

// Errors of the snapshot operations that callers test for; each comes
// wrapped with the names concerned and unwraps to its errno too.
var (
	ErrSnapshotExists  = fmt.Errorf("snapshot exists: %w", syscall.EEXIST)
	ErrSnapshotUnknown = fmt.Errorf("no such snapshot: %w", syscall.ENOENT)
)

// mayManageSnapshots checks that c may take or remove snapshots of d: its
// owner or root (EPERM).
func (e *Engine) mayManageSnapshots(c Cred, d *node) error {
	if !e.isOwner(c, d) {
		return syscall.EPERM
	}
	return nil
}

// checkSnapshotName checks a snapshot's name as an entry name; "." and
// ".." are EINVAL.
func checkSnapshotName(name string) error {
	if err := checkSyntax(name); err != nil {
		return err
	}
	if err := checkLen(name); err != nil {
		return err
	}
	if isDot(name) {
		return syscall.EINVAL
	}
	return nil
}

// SnapshotCreate takes snapshot name of directory dir at time now: a
// read-only copy of its subtree at dir/.snapshot/name, whose files share
// the data of the directory's until either side changes (clone_copy.go).
// Only the directory's owner or root may (EPERM); a directory in the
// snapshot area is EROFS, a name already taken ErrSnapshotExists, and a
// directory that has an entry named ".snapshot" of its own EEXIST. The
// copy counts against the quotas over the root, like the trash. It costs
// a walk of the subtree's metadata, nothing of its data.
func (e *Engine) SnapshotCreate(c Cred, dir Ino, name string, now int64) (SnapshotInfo, error) {
	d, err := e.dir(dir)
	if err != nil {
		return SnapshotInfo{}, err
	}
	s := e.snaps()
	if err := e.roCheck(dir); err != nil {
		return SnapshotInfo{}, err
	}
	if err := e.mayManageSnapshots(c, d); err != nil {
		return SnapshotInfo{}, err
	}
	if err := checkSnapshotName(name); err != nil {
		return SnapshotInfo{}, err
	}
	if e.pinned(dir) {
		return SnapshotInfo{}, syscall.EBUSY
	}
	if _, own := e.peekChild(d, SnapshotDir); own != nil {
		return SnapshotInfo{}, fmt.Errorf("%d has an entry named %s: %w", dir, SnapshotDir, syscall.EEXIST)
	}
	var area, ad *node
	if s.area != 0 {
		area = e.node(s.area)
		if a, ok := s.dirs[dir]; ok {
			ad = e.node(a)
			if _, taken := e.peekChild(ad, name); taken != nil {
				return SnapshotInfo{}, fmt.Errorf("%q: %w", name, ErrSnapshotExists)
			}
		}
	}
	o := copyOpts{c: Root, keepOwner: true}
	if dir == e.root {
		o.skip = s.area
	}
	p, err := e.planCopy(d, name, o)
	if err != nil {
		return SnapshotInfo{}, err
	}
	// The area's own directories, where they are still to be made.
	var extra uint64
	if area == nil {
		extra++
	}
	if ad == nil {
		extra++
	}
	root := e.node(e.root)
	if e.next+p.nodes+extra >= 1<<localBits {
		return SnapshotInfo{}, syscall.ENOSPC
	}
	q := e.regionOf(root)
	if err := e.quotaCheck(q, p.nodes+extra, p.bytes); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot of %d nodes and %d bytes: %w", p.nodes, p.bytes, err)
	}

	if area == nil {
		area = e.areaDir(root, SnapshotArea, 0o700, q, now)
		s.area = area.Ino
		s.dirs, s.areas = make(map[Ino]Ino), make(map[Ino]Ino)
	}
	if ad == nil {
		ad = e.areaDir(area, strconv.FormatUint(uint64(dir), 10), 0o555, q, now)
		s.dirs[dir], s.areas[ad.Ino] = ad.Ino, dir
	}
	lo := MakeIno(e.part, e.next)
	top := e.makeCopy(p, ad, q, o, now)
	top.Ctime = now
	s.ranges = append(s.ranges, snapRange{lo: lo, hi: MakeIno(e.part, e.next-1), bytes: p.bytes})
	s.sortRanges()
	return SnapshotInfo{Name: name, Dir: dir, Ino: top.Ino, Created: now, Nodes: p.nodes, Bytes: p.bytes}, nil
}

// areaDir makes directory name, owned by root, in directory d of the
// snapshot area, counted under quota q.
func (e *Engine) areaDir(d *node, name string, mode uint32, q Ino, now int64) *node {
	slot, n := e.st.add(e.alloc())
	n.Mode, n.Nlink, n.Size = S_IFDIR|mode, 2, dirSize
	n.Atime, n.Mtime, n.Ctime = now, now, now
	x := e.st.extra(n)
	x.parent = d.Ino
	x.dir = &dirents{}
	e.addEntry(d, name, slot, now)
	d.Nlink++
	if q != 0 {
		e.quotaAdd(q, 1, 0)
	}
	return n
}

// SnapshotList returns the snapshots of directory dir, by name.
func (e *Engine) SnapshotList(dir Ino) ([]SnapshotInfo, error) {
	d, err := e.peekDir(dir)
	if err != nil {
		return nil, err
	}
	s := e.snaps()
	a, ok := s.dirs[dir]
	if !ok {
		return nil, nil
	}
	ad := e.st.peek(a)
	var out []SnapshotInfo
	for _, name := range e.sortedNames(ad) {
		_, top := e.peekChild(ad, name)
		info := SnapshotInfo{Name: name, Dir: d.Ino, Ino: top.Ino, Created: top.Ctime}
		if i, ok := s.roots[top.Ino]; ok {
			r := s.ranges[i]
			info.Nodes, info.Bytes = uint64(r.hi-r.lo)+1, r.bytes
		}
		out = append(out, info)
	}
	return out, nil
}

// snapshotRoot returns snapshot name of directory dir, or
// ErrSnapshotUnknown.
func (e *Engine) snapshotRoot(dir Ino, name string) (*node, error) {
	s := e.snaps()
	if a, ok := s.dirs[dir]; ok {
		if _, top := e.peekChild(e.st.peek(a), name); top != nil {
			return top, nil
		}
	}
	return nil, fmt.Errorf("%q: %w", name, ErrSnapshotUnknown)
}

// SnapshotRemove removes snapshot name of directory dir at time now: its
// nodes go, and the slices that nothing else names become garbage at
// now. Only the directory's owner or root may (EPERM). The area's
// directories go with their last snapshot, so a partition without
// snapshots has no area.
func (e *Engine) SnapshotRemove(c Cred, dir Ino, name string, now int64) error {
	d, err := e.peekDir(dir)
	if err != nil {
		return err
	}
	if err := e.mayManageSnapshots(c, d); err != nil {
		return err
	}
	if err := checkSnapshotName(name); err != nil {
		return err
	}
	top, err := e.snapshotRoot(dir, name)
	if err != nil {
		return err
	}
	s := e.snaps()
	i, ok := s.roots[top.Ino]
	if !ok {
		return fmt.Errorf("snapshot %q of %d has no range: %w", name, dir, syscall.EIO)
	}
	r := s.ranges[i]
	ad := e.node(s.dirs[dir])
	e.removeEntry(ad, name, now)
	if top.isDir() {
		ad.Nlink--
	}
	// Children have higher numbers than their directory (the copy made
	// them breadth first), so freeing from the top of the range down
	// frees every directory after what it holds, and the order of freed
	// slots is a function of the snapshot alone.
	for ino := r.hi; ino >= r.lo; ino-- {
		n := e.node(ino)
		if n.isDir() {
			e.entries(n) // inflated if the idle sweep packed it, so that its counts go with it
		} else {
			n.Nlink = 1 // its entries go with their directories
		}
		e.dropLink(n, now)
	}
	s.ranges = append(s.ranges[:i], s.ranges[i+1:]...)
	s.sortRanges()
	if e.st.extraOf(ad).dir.live > 0 {
		return nil
	}
	area := e.node(s.area)
	e.removeEntry(area, strconv.FormatUint(uint64(dir), 10), now)
	area.Nlink--
	e.dropLink(ad, now)
	delete(s.dirs, dir)
	delete(s.areas, ad.Ino)
	if len(s.dirs) > 0 {
		return nil
	}
	root := e.node(e.root)
	e.removeEntry(root, SnapshotArea, now)
	root.Nlink--
	e.dropLink(area, now)
	*s = snapState{ready: true}
	return nil
}

// checkSnapshots checks the snapshot area against the tree: its layout,
// that every snapshot's nodes are one range of inode numbers, that every
// directory with snapshots exists, and, once derived, that the state
// kept agrees with a fresh derivation.
func (e *Engine) checkSnapshots() error {
	fresh, err := e.snapScan()
	if err != nil {
		return err
	}
	for dir := range fresh.dirs {
		if n := e.st.peek(dir); n == nil || !n.isDir() {
			return fmt.Errorf("snapshots of %d, which is not a directory", dir)
		}
		if e.inRangeOf(&fresh, dir) {
			return fmt.Errorf("snapshots of %d, which is in a snapshot", dir)
		}
	}
	if !e.snap.ready {
		return nil
	}
	kept := &e.snap
	if kept.area != fresh.area || len(kept.dirs) != len(fresh.dirs) || len(kept.ranges) != len(fresh.ranges) {
		return fmt.Errorf("snapshots: area %d with %d directories and %d snapshots kept, %d with %d and %d in the tree",
			kept.area, len(kept.dirs), len(kept.ranges), fresh.area, len(fresh.dirs), len(fresh.ranges))
	}
	for dir, a := range fresh.dirs {
		if kept.dirs[dir] != a || kept.areas[a] != dir {
			return fmt.Errorf("snapshots of %d: area directory %d kept, %d in the tree", dir, kept.dirs[dir], a)
		}
	}
	for i, r := range fresh.ranges {
		if kept.ranges[i] != r {
			return fmt.Errorf("snapshot range %v kept, %v in the tree", kept.ranges[i], r)
		}
	}
	return nil
}

// inRangeOf reports whether ino is a node of a snapshot of s.
func (e *Engine) inRangeOf(s *snapState, ino Ino) bool { return s.inRange(ino) }
