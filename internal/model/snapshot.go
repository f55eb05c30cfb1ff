package model

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Clones and snapshots, as the model has them.
//
// A clone makes a new entry name of a directory a writable copy of a node
// and, for a directory, of everything below it, as the inode number's
// partition allows (EXDEV for another partition's). The new entry is
// checked as any new entry; then, without root, the caller must read every
// regular file and read and search every directory it copies (EACCES).
// The copy's nodes keep the type, permission bits, times, size, device
// number, symlink target and xattrs (ACLs included) of theirs, and the
// links within the source stay links of one node within the copy. Root's
// copy keeps the owners; anyone else's is owned by the caller (its uid
// and primary gid), and its non-directories lose their set-id bits. The
// copy counts against the quotas over the directory it goes into (EDQUOT,
// changing nothing) and is of the source as it was before the new entry,
// so a copy into its own subtree does not hold itself. A clone of the
// root leaves out the snapshot area.
//
// A snapshot of a directory is a read-only copy of its subtree, made as
// root's clone would make it (no permission is needed to read it, the
// owners stay) into /.snapshots/<dir>/<name>, where <dir> is the
// directory's inode number in decimal; the snapshot's root has its ctime
// set to the time it was taken. The area directories are made first, so
// a snapshot of the root has the mtime that making them left it. The area /.snapshots (mode 0700) and its
// directories (mode 0555) are made, owned by root, when first needed, and
// go with their last snapshot. A lookup of ".snapshot" in a directory with
// snapshots that has no entry of that name answers its directory in the
// area, so a snapshot reads at PATH/.snapshot/NAME. Only the directory's
// owner or root takes, removes and compares snapshots (EPERM). Taking one
// of a directory in the area is EROFS, one of a directory with an entry
// ".snapshot" EEXIST, one of a taken name EEXIST; "." and ".." are EINVAL
// as names. The copy, with the area directories it makes, counts against
// the quotas over the root.
//
// Everything in the area is read only: a new entry there, a removal or
// rename of or within it, a link of a node in it, a change of its
// attributes or xattrs, all fail with EROFS. A new entry ".snapshots" in
// the root is EPERM; a new entry ".snapshot" in a directory with
// snapshots EEXIST; removing or replacing a directory that has snapshots
// EBUSY.
//
// Copies are numbered from the next free inode number on, one number a
// node, the copy's root first (after the area directories a snapshot
// makes); which of its numbers each other node gets is not part of the
// semantics. The oracle numbers them breadth first in source number order
// and the runner takes the target's numbering instead, once it has
// checked that it is a numbering of the same nodes (run.go, relabel).

// SnapshotInfo is one snapshot of a directory.
type SnapshotInfo struct {
	Name    string
	Dir     Ino   // the directory it is of
	Ino     Ino   // its root
	Created int64 // its root's ctime
	Nodes   uint64
	Bytes   uint64
}

// SnapshotChange is one difference between two states of a directory's
// subtree: Op is '+' for an entry only the later state has, '-' for one
// only the earlier has, 'M' for one whose node differs (permissions, type
// bits, owner, size of a non-directory, mtime, symlink target, device
// number, xattrs). Path is relative to the directory ("." for itself); an
// entry whose type changed is '-' then '+', and what lies below an entry
// only one state has is not listed.
type SnapshotChange struct {
	Op   byte
	Path string
	Type uint32
}

// SnapshotNamespace is the optional part of a Namespace that has clones
// and snapshots; their ops need it.
type SnapshotNamespace interface {
	Clone(c Cred, src Ino, dstParent Ino, name string, now int64) (Attr, error)
	SnapshotCreate(c Cred, dir Ino, name string, now int64) (SnapshotInfo, error)
	SnapshotList(dir Ino) ([]SnapshotInfo, error)
	SnapshotRemove(c Cred, dir Ino, name string, now int64) error
	SnapshotDiff(c Cred, dir Ino, from, to string) ([]SnapshotChange, bool, error)
}

var _ SnapshotNamespace = (*Oracle)(nil)

// Names of the snapshot area.
const (
	// SnapshotArea is the root's entry that holds every snapshot.
	SnapshotArea = ".snapshots"
	// SnapshotDir is the name under which a directory shows its
	// snapshots.
	SnapshotDir = ".snapshot"
)

var errNoSnapshots = errors.New("model: the namespace has no clones or snapshots")

// applySnapshot runs a snapshot op on directory ino (resolved as root); a
// wrapped errno counts as the errno.
func applySnapshot(ns Namespace, op Op, ino Ino, now int64) (*Attr, string, error) {
	sn, ok := ns.(SnapshotNamespace)
	if !ok {
		return nil, "", errNoSnapshots
	}
	var a *Attr
	var text string
	var err error
	switch op.Kind {
	case KSnapCreate:
		var info SnapshotInfo
		if info, err = sn.SnapshotCreate(op.Cred, ino, op.Name, now); err == nil {
			var top Attr
			if top, err = ns.GetAttr(info.Ino); err == nil {
				a = &top
			}
			text = formatSnapshots([]SnapshotInfo{info})
		}
	case KSnapLs:
		var list []SnapshotInfo
		list, err = sn.SnapshotList(ino)
		text = formatSnapshots(list)
	case KSnapRm:
		err = sn.SnapshotRemove(op.Cred, ino, op.Name, now)
	default:
		var changes []SnapshotChange
		var truncated bool
		changes, truncated, err = sn.SnapshotDiff(op.Cred, ino, op.Name, op.Name2)
		text = formatChanges(changes, truncated)
	}
	var errno syscall.Errno
	if err != nil && errors.As(err, &errno) {
		return nil, "", errno
	}
	return a, text, err
}

func formatSnapshots(list []SnapshotInfo) string {
	var b strings.Builder
	for _, s := range list {
		fmt.Fprintf(&b, "%q dir=%d ino=%d created=%d nodes=%d bytes=%d\n", s.Name, s.Dir.Local(), s.Ino.Local(), s.Created, s.Nodes, s.Bytes)
	}
	return b.String()
}

func formatChanges(changes []SnapshotChange, truncated bool) string {
	var b strings.Builder
	for _, c := range changes {
		fmt.Fprintf(&b, "%c %q %s\n", c.Op, c.Path, TypeName(c.Type))
	}
	if truncated {
		b.WriteString("truncated\n")
	}
	return b.String()
}

// ---- the area ----

// area returns /.snapshots, or nil.
func (m *Oracle) area() *node {
	ino, ok := m.nodes[m.root].ents[SnapshotArea]
	if !ok || !m.nodes[ino].dir() {
		return nil
	}
	return m.nodes[ino]
}

func areaName(dir Ino) string { return strconv.FormatUint(uint64(dir), 10) }

// snapDir returns directory dir's directory in the area, or nil.
func (m *Oracle) snapDir(dir Ino) *node {
	a := m.area()
	if a == nil {
		return nil
	}
	ino, ok := a.ents[areaName(dir)]
	if !ok || !m.nodes[ino].dir() {
		return nil
	}
	return m.nodes[ino]
}

// hasSnapshots reports whether directory dir has snapshots.
func (m *Oracle) hasSnapshots(dir Ino) bool { return m.snapDir(dir) != nil }

// readOnly reports whether n lies in the snapshot area.
func (m *Oracle) readOnly(n *node) bool {
	a := m.area()
	if a == nil {
		return false
	}
	if !n.dir() {
		for _, d := range m.nodes {
			if d.dir() {
				for _, child := range d.ents {
					if child == n.ino {
						return m.readOnly(d)
					}
				}
			}
		}
		return false
	}
	return m.ancestorOrSelf(a, n)
}

// roErr is EROFS if any of the nodes lies in the snapshot area.
func (m *Oracle) roErr(nodes ...*node) error {
	if m.area() == nil || m.bug == bugSnapshotWritable {
		return nil
	}
	for _, n := range nodes {
		if n != nil && m.readOnly(n) {
			return syscall.EROFS
		}
	}
	return nil
}

// entryErr is what the snapshots say to a new entry name of d.
func (m *Oracle) entryErr(d *node, name string) error {
	if err := m.roErr(d); err != nil {
		return err
	}
	if d.ino == m.root && name == SnapshotArea {
		return syscall.EPERM
	}
	if name == SnapshotDir && m.hasSnapshots(d.ino) {
		return syscall.EEXIST
	}
	return nil
}

// removeErr is what the snapshots say to removing or replacing entry
// victim of d.
func (m *Oracle) removeErr(d, victim *node) error {
	if err := m.roErr(d, victim); err != nil {
		return err
	}
	if victim.dir() && m.hasSnapshots(victim.ino) {
		return syscall.EBUSY
	}
	return nil
}

// ---- copies ----

// copyNodes lists the distinct nodes of the subtree at src, breadth
// first, each directory's entries in inode number order, leaving out
// skip; with check, c must read every regular file and read and search
// every directory (EACCES).
func (m *Oracle) copyNodes(c Cred, src *node, skip *node, check bool) ([]*node, error) {
	out := []*node{src}
	seen := map[Ino]bool{src.ino: true}
	for i := 0; i < len(out); i++ {
		n := out[i]
		if check && c.UID != 0 {
			switch {
			case n.dir() && !permits(c, n, permR|permX):
				return nil, syscall.EACCES
			case n.typ == S_IFREG && !permits(c, n, permR):
				return nil, syscall.EACCES
			}
		}
		if !n.dir() {
			continue
		}
		var kids []Ino
		for _, ino := range n.ents {
			if !seen[ino] && (skip == nil || ino != skip.ino) {
				seen[ino] = true
				kids = append(kids, ino)
			}
		}
		sort.Slice(kids, func(i, j int) bool { return kids[i] < kids[j] })
		for _, ino := range kids {
			out = append(out, m.nodes[ino])
		}
	}
	return out, nil
}

// makeCopy makes the copies of nodes (copyNodes' list, whose first is the
// root) numbered from first on, not yet in the tree, and returns them in
// the same order; their entries name the copies. The root's parent is
// left to the caller.
func (m *Oracle) makeCopy(nodes []*node, first uint64, owner *Cred, skip *node) []*node {
	num := make(map[Ino]Ino, len(nodes))
	for i, n := range nodes {
		num[n.ino] = MakeIno(m.part, first+uint64(i))
	}
	out := make([]*node, len(nodes))
	for i, s := range nodes {
		n := &node{
			ino: num[s.ino], typ: s.typ, perm: s.perm, uid: s.uid, gid: s.gid, size: s.size, rdev: s.rdev,
			atime: s.atime, mtime: s.mtime, ctime: s.ctime, target: s.target, xattrs: make(map[string][]byte, len(s.xattrs)),
		}
		for k, v := range s.xattrs {
			n.xattrs[k] = append([]byte(nil), v...)
		}
		if owner != nil {
			n.uid, n.gid = owner.UID, owner.GID
			if !n.dir() {
				n.perm &^= S_ISUID | S_ISGID
			}
		}
		if s.dir() {
			n.ents = make(map[string]Ino, len(s.ents))
			for name, ino := range s.ents {
				if skip == nil || ino != skip.ino {
					n.ents[name] = num[ino]
				}
			}
			if i > 0 {
				n.parent = num[s.parent]
			}
		}
		out[i] = n
	}
	return out
}

// place puts copy (makeCopy's) into the tree as entry name of d, with
// quotas (EDQUOT changes nothing), and advances the numbers.
func (m *Oracle) place(copy []*node, d *node, name string, now int64) error {
	top := copy[0]
	if top.dir() {
		top.parent = d.ino
	}
	insert := func() {
		for _, n := range copy {
			m.nodes[n.ino] = n
		}
		d.ents[name] = top.ino
	}
	remove := func() {
		for _, n := range copy {
			delete(m.nodes, n.ino)
		}
		delete(d.ents, name)
	}
	if err := m.quotaTry(insert, remove); err != nil {
		return err
	}
	insert()
	d.mtime, d.ctime = now, now
	m.next += uint64(len(copy))
	return nil
}

// Clone is the model's clone of src as entry name of dstParent.
func (m *Oracle) Clone(c Cred, src, dstParent Ino, name string, now int64) (Attr, error) {
	if src.Partition() != m.part || dstParent.Partition() != m.part {
		return Attr{}, syscall.EXDEV
	}
	s, ok := m.nodes[src]
	if !ok {
		return Attr{}, syscall.ENOENT
	}
	d, err := m.prepCreate(c, dstParent, name)
	if err != nil {
		return Attr{}, err
	}
	var skip *node
	if src == m.root {
		skip = m.area()
	}
	nodes, err := m.copyNodes(c, s, skip, true)
	if err != nil {
		return Attr{}, err
	}
	var owner *Cred
	if c.UID != 0 {
		owner = &Cred{UID: c.UID, GID: c.GID}
	}
	copy := m.makeCopy(nodes, m.next, owner, skip)
	if err := m.place(copy, d, name, now); err != nil {
		return Attr{}, err
	}
	return m.attr(copy[0]), nil
}

// checkSnapshotName checks a snapshot's name as an entry's; "." and ".."
// are EINVAL.
func checkSnapshotName(name string) error {
	if err := apiName(name); err != nil {
		return err
	}
	if len(name) > NameMax {
		return syscall.ENAMETOOLONG
	}
	if isDotName(name) {
		return syscall.EINVAL
	}
	return nil
}

// areaNode is a directory of the area, owned by root, not yet in the tree.
func (m *Oracle) areaNode(ino Ino, parent *node, perm uint32, now int64) *node {
	return &node{ino: ino, typ: S_IFDIR, perm: perm, parent: parent.ino, atime: now, mtime: now, ctime: now,
		xattrs: map[string][]byte{}, ents: map[string]Ino{}}
}

// SnapshotCreate is the model's snapshot name of directory dir.
func (m *Oracle) SnapshotCreate(c Cred, dir Ino, name string, now int64) (SnapshotInfo, error) {
	d, err := m.dirNode(dir)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if err := m.roErr(d); err != nil {
		return SnapshotInfo{}, err
	}
	if !ownerOrRoot(c, d) {
		return SnapshotInfo{}, syscall.EPERM
	}
	if err := checkSnapshotName(name); err != nil {
		return SnapshotInfo{}, err
	}
	if _, own := d.ents[SnapshotDir]; own {
		return SnapshotInfo{}, syscall.EEXIST
	}
	area, ad := m.area(), m.snapDir(dir)
	if ad != nil {
		if _, taken := ad.ents[name]; taken {
			return SnapshotInfo{}, syscall.EEXIST
		}
	}
	var skip *node
	if dir == m.root {
		skip = area
	}
	nodes, _ := m.copyNodes(CredRoot, d, skip, false)
	root := m.nodes[m.root]
	next := m.next
	var made []*node // the area directories to make
	if area == nil {
		area = m.areaNode(MakeIno(m.part, next), root, 0o700, now)
		made = append(made, area)
		next++
	}
	if ad == nil {
		ad = m.areaNode(MakeIno(m.part, next), area, 0o555, now)
		made = append(made, ad)
		next++
	}
	copy := m.makeCopy(nodes, next, nil, skip)
	top := copy[0]
	top.ctime = now
	if top.dir() {
		top.parent = ad.ino
	}
	all := append(append([]*node(nil), made...), copy...)
	oldArea, hadArea := root.ents[SnapshotArea]
	_, hadAd := area.ents[areaName(dir)]
	insert := func() {
		for _, n := range all {
			m.nodes[n.ino] = n
		}
		root.ents[SnapshotArea] = area.ino
		area.ents[areaName(dir)] = ad.ino
		ad.ents[name] = top.ino
	}
	remove := func() {
		for _, n := range all {
			delete(m.nodes, n.ino)
		}
		delete(ad.ents, name)
		if !hadAd {
			delete(area.ents, areaName(dir))
		}
		if hadArea {
			root.ents[SnapshotArea] = oldArea
		} else {
			delete(root.ents, SnapshotArea)
		}
	}
	if err := m.quotaTry(insert, remove); err != nil {
		return SnapshotInfo{}, err
	}
	insert()
	for _, n := range made {
		p := m.nodes[n.parent]
		p.mtime, p.ctime = now, now
	}
	ad.mtime, ad.ctime = now, now
	if dir == m.root {
		// The area is made first: the root's copy has the times making
		// it left.
		top.mtime = root.mtime
	}
	m.next = next + uint64(len(copy))
	files, bytes := m.distinctUsage(top)
	return SnapshotInfo{Name: name, Dir: dir, Ino: top.ino, Created: now, Nodes: files, Bytes: bytes}, nil
}

// distinctUsage counts the distinct nodes of the subtree at n, n included,
// and the sizes of its regular files, each node once.
func (m *Oracle) distinctUsage(n *node) (nodes, bytes uint64) {
	list, _ := m.copyNodes(CredRoot, n, nil, false)
	for _, x := range list {
		if x.typ == S_IFREG {
			bytes += x.size
		}
	}
	return uint64(len(list)), bytes
}

// SnapshotList is the model's list of directory dir's snapshots, by name.
func (m *Oracle) SnapshotList(dir Ino) ([]SnapshotInfo, error) {
	if _, err := m.dirNode(dir); err != nil {
		return nil, err
	}
	ad := m.snapDir(dir)
	if ad == nil {
		return nil, nil
	}
	var out []SnapshotInfo
	for _, name := range m.sortedNames(ad) {
		top := m.nodes[ad.ents[name]]
		nodes, bytes := m.distinctUsage(top)
		out = append(out, SnapshotInfo{Name: name, Dir: dir, Ino: top.ino, Created: top.ctime, Nodes: nodes, Bytes: bytes})
	}
	return out, nil
}

// snapshotRoot returns snapshot name of dir (ENOENT if there is none).
func (m *Oracle) snapshotRoot(dir Ino, name string) (*node, error) {
	if ad := m.snapDir(dir); ad != nil {
		if ino, ok := ad.ents[name]; ok {
			return m.nodes[ino], nil
		}
	}
	return nil, syscall.ENOENT
}

// SnapshotRemove is the model's removal of snapshot name of dir: its nodes
// go, and the area's directories with their last snapshot.
func (m *Oracle) SnapshotRemove(c Cred, dir Ino, name string, now int64) error {
	d, err := m.dirNode(dir)
	if err != nil {
		return err
	}
	if !ownerOrRoot(c, d) {
		return syscall.EPERM
	}
	if err := checkSnapshotName(name); err != nil {
		return err
	}
	top, err := m.snapshotRoot(dir, name)
	if err != nil {
		return err
	}
	nodes, _ := m.copyNodes(CredRoot, top, nil, false)
	for _, n := range nodes {
		delete(m.nodes, n.ino)
		delete(m.quotas, n.ino)
	}
	ad, area, root := m.snapDir(dir), m.area(), m.nodes[m.root]
	delete(ad.ents, name)
	ad.mtime, ad.ctime = now, now
	if len(ad.ents) > 0 {
		return nil
	}
	delete(area.ents, areaName(dir))
	delete(m.nodes, ad.ino)
	delete(m.quotas, ad.ino)
	area.mtime, area.ctime = now, now
	if len(area.ents) > 0 {
		return nil
	}
	delete(root.ents, SnapshotArea)
	delete(m.nodes, area.ino)
	delete(m.quotas, area.ino)
	root.mtime, root.ctime = now, now
	return nil
}

// applyClone runs a clone on ns; a wrapped errno counts as the errno.
func applyClone(ns Namespace, c Cred, src, dstParent Ino, name string, now int64) (Attr, error) {
	sn, ok := ns.(SnapshotNamespace)
	if !ok {
		return Attr{}, errNoSnapshots
	}
	a, err := sn.Clone(c, src, dstParent, name, now)
	var errno syscall.Errno
	if err != nil && errors.As(err, &errno) {
		return Attr{}, errno
	}
	return a, err
}
