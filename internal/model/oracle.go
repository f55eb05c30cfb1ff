package model

import (
	"sort"
	"strings"
	"syscall"
)

type node struct {
	ino    Ino
	typ    uint32 // S_IFxxx
	perm   uint32 // permission, set-id and sticky bits (07777)
	uid    uint32
	gid    uint32
	size   uint64 // regular files
	rdev   uint32
	atime  int64
	mtime  int64
	ctime  int64
	target string            // symlinks
	xattrs map[string][]byte // never nil
	ents   map[string]Ino    // directories
	parent Ino               // directories: the one holding it (the root: itself)
}

func (n *node) dir() bool { return n.typ == S_IFDIR }

// Oracle is the reference model of one partition's namespace. It belongs
// to the goroutine that applies operations to it.
type Oracle struct {
	bug bug // a deliberately broken rule, set only by this package's tests

	// refsFrozen, while a tree comparison (which only reads) runs, holds
	// every node's entry count, counted once.
	refsFrozen map[Ino]uint32
	part       uint16
	next       uint64
	root       Ino
	nodes      map[Ino]*node
	quotas     map[Ino]Quota // directory quotas' limits (quota.go)
	trash      bool          // removals keep what they would free (trash.go)
}

// New returns the namespace of partition p as mkfs leaves it: an empty
// root directory, mode 0755, owned by root, with all times now.
func New(p uint16, now int64) *Oracle {
	m := &Oracle{part: p, next: 2, root: MakeIno(p, 1), nodes: map[Ino]*node{}}
	m.nodes[m.root] = &node{
		ino: m.root, typ: S_IFDIR, perm: 0o755, parent: m.root,
		atime: now, mtime: now, ctime: now,
		xattrs: map[string][]byte{}, ents: map[string]Ino{},
	}
	return m
}

// Root returns the root directory's inode number.
func (m *Oracle) Root() Ino { return m.root }

// Len returns the number of live nodes.
func (m *Oracle) Len() int { return len(m.nodes) }

// Searchable reports whether c may search directory ino (false if ino is
// not a live directory).
func (m *Oracle) Searchable(c Cred, ino Ino) bool {
	d, err := m.dirNode(ino)
	return err == nil && permits(c, d, permX)
}

// bug names a rule that a test breaks on purpose, to show that the runner
// catches it and the shrinker reduces the failure.
type bug int

const (
	bugNone             bug = iota
	bugRenameCtime          // rename leaves the moved node's ctime alone
	bugRmdirNonEmpty        // rmdir removes a directory that has entries
	bugSnapshotWritable     // the snapshot area takes changes
)

// ---- derived state ----

// refs counts the directory entries that name ino.
func (m *Oracle) refs(ino Ino) uint32 {
	if m.refsFrozen != nil {
		return m.refsFrozen[ino]
	}
	var k uint32
	for _, d := range m.nodes {
		for _, child := range d.ents {
			if child == ino {
				k++
			}
		}
	}
	return k
}

func (m *Oracle) nlink(n *node) uint32 {
	if !n.dir() {
		return m.refs(n.ino)
	}
	k := uint32(2)
	for _, child := range n.ents {
		if m.nodes[child].dir() {
			k++
		}
	}
	return k
}

// parentOf returns the directory holding directory d (the root for the
// root). The link is recorded when a directory is made or moved, and
// compareTrees checks it against the entries.
func (m *Oracle) parentOf(d *node) *node { return m.nodes[d.parent] }

// derivedParent finds the directory holding directory d from the entries.
func (m *Oracle) derivedParent(d *node) Ino {
	if d.ino == m.root {
		return m.root
	}
	for _, p := range m.nodes {
		for _, child := range p.ents {
			if child == d.ino {
				return p.ino
			}
		}
	}
	return 0
}

// ancestorOrSelf reports whether a is d or above d.
func (m *Oracle) ancestorOrSelf(a, d *node) bool {
	for {
		if a == d {
			return true
		}
		if d.ino == m.root {
			return false
		}
		d = m.parentOf(d)
	}
}

func (m *Oracle) attr(n *node) Attr {
	a := Attr{
		Ino: n.ino, Mode: n.typ | n.perm, UID: n.uid, GID: n.gid, Nlink: m.nlink(n),
		Atime: n.atime, Mtime: n.mtime, Ctime: n.ctime, Rdev: n.rdev,
	}
	switch n.typ {
	case S_IFDIR:
		a.Size = DirSize
	case S_IFREG:
		a.Size = n.size
	case S_IFLNK:
		a.Size = uint64(len(n.target))
	}
	return a
}

// freezeRefs counts every node's entries once, for a run of reads; thaw
// with m.refsFrozen = nil before the next change.
func (m *Oracle) freezeRefs() {
	m.refsFrozen = map[Ino]uint32{}
	for _, d := range m.nodes {
		for _, child := range d.ents {
			m.refsFrozen[child]++
		}
	}
}

// forget drops a node that no entry names any more.
func (m *Oracle) forget(n *node) {
	if n.dir() || m.refs(n.ino) == 0 {
		delete(m.nodes, n.ino)
		delete(m.quotas, n.ino)
	}
}

// ---- permissions ----

func inGroup(c Cred, gid uint32) bool {
	if c.GID == gid {
		return true
	}
	for _, g := range c.Groups {
		if g == gid {
			return true
		}
	}
	return false
}

// permits is generic_permission: the owner class, else the access ACL
// (acl.go) if there is one and the group class is not empty, else the
// group class, else the other class; root may do anything but execute a
// non-directory that has no execute bit at all.
func permits(c Cred, n *node, want uint32) bool {
	if c.UID == 0 {
		return want&permX == 0 || n.dir() || n.perm&0o111 != 0
	}
	var bits uint32
	switch {
	case c.UID == n.uid:
		bits = n.perm >> 6
	default:
		if ok, handled := aclPermits(c, n, want); handled {
			return ok
		}
		if inGroup(c, n.gid) {
			bits = n.perm >> 3
		} else {
			bits = n.perm
		}
	}
	return bits&7&want == want
}

func ownerOrRoot(c Cred, n *node) bool { return c.UID == 0 || c.UID == n.uid }

// mMayDelete is may_delete without the type checks: write and search on the
// directory, and the sticky-bit rule.
func mMayDelete(c Cred, d, victim *node) error {
	if !permits(c, d, permW|permX) {
		return syscall.EACCES
	}
	if d.perm&S_ISVTX != 0 && c.UID != 0 && c.UID != d.uid && c.UID != victim.uid {
		return syscall.EPERM
	}
	return nil
}

// ---- names and paths ----

// apiName rejects names that no *at call could carry, in the order the
// engine documents for them: the empty name (ENOENT, as the empty path),
// then names with a '/' or NUL (ENAMETOOLONG if also over NAME_MAX, else
// EINVAL).
func apiName(name string) error {
	if name == "" {
		return syscall.ENOENT
	}
	if strings.ContainsAny(name, "/\x00") {
		if len(name) > NameMax {
			return syscall.ENAMETOOLONG
		}
		return syscall.EINVAL
	}
	return nil
}

func isDotName(name string) bool { return name == "." || name == ".." }

func (m *Oracle) dirNode(ino Ino) (*node, error) {
	d, ok := m.nodes[ino]
	if !ok {
		return nil, syscall.ENOENT
	}
	if !d.dir() {
		return nil, syscall.ENOTDIR
	}
	return d, nil
}

// child looks name up in d, after the search permission check that the
// caller did: "." and ".." first, then the file system's lookup, which is
// where Linux rejects a component longer than NAME_MAX.
func (m *Oracle) child(d *node, name string) (*node, error) {
	switch name {
	case ".":
		return d, nil
	case "..":
		return m.parentOf(d), nil
	}
	if len(name) > NameMax {
		return nil, syscall.ENAMETOOLONG
	}
	ino, ok := d.ents[name]
	if !ok {
		if name == SnapshotDir {
			if ad := m.snapDir(d.ino); ad != nil {
				return ad, nil // the directory's snapshots (snapshot.go)
			}
		}
		return nil, syscall.ENOENT
	}
	return m.nodes[ino], nil
}

// checkPath is getname's check plus the API's: a path is at most
// PATH_MAX-1 bytes, not empty, absolute and NUL-free.
func checkModelPath(path string) error {
	switch {
	case len(path) >= PathMax:
		return syscall.ENAMETOOLONG
	case path == "":
		return syscall.ENOENT
	case path[0] != '/' || strings.IndexByte(path, 0) >= 0:
		return syscall.EINVAL
	}
	return nil
}

// walk is path_lookupat: each directory on the way must be searchable, a
// symlink is followed unless it is the last component and neither follow
// nor a trailing slash asks for it, at most 40 symlinks per lookup, and a
// trailing slash demands a directory.
func (m *Oracle) walk(c Cred, start *node, path string, follow bool, links *int) (*node, error) {
	cur := start
	if strings.HasPrefix(path, "/") {
		cur = m.nodes[m.root]
	}
	var comps []string
	for _, s := range strings.Split(path, "/") {
		if s != "" {
			comps = append(comps, s)
		}
	}
	trailing := strings.HasSuffix(path, "/")
	for i, comp := range comps {
		if !cur.dir() {
			return nil, syscall.ENOTDIR
		}
		if !permits(c, cur, permX) {
			return nil, syscall.EACCES
		}
		next, err := m.child(cur, comp)
		if err != nil {
			return nil, err
		}
		last := i == len(comps)-1
		if next.typ == S_IFLNK && (!last || follow || trailing) {
			*links++
			if *links > SymlinkMax {
				return nil, syscall.ELOOP
			}
			if next, err = m.walk(c, cur, next.target, true, links); err != nil {
				return nil, err
			}
		}
		cur = next
	}
	if trailing && !cur.dir() {
		return nil, syscall.ENOTDIR
	}
	return cur, nil
}

// ---- namespace: reads ----

func (m *Oracle) Resolve(c Cred, path string, follow bool) (Attr, error) {
	if err := checkModelPath(path); err != nil {
		return Attr{}, err
	}
	links := 0
	n, err := m.walk(c, m.nodes[m.root], path, follow, &links)
	if err != nil {
		return Attr{}, err
	}
	return m.attr(n), nil
}

// ResolveParent walks to the directory that holds the last component and
// returns that component unchecked: the operation that receives it checks
// it after searching the directory, as the system call would.
func (m *Oracle) ResolveParent(c Cred, path string) (Ino, string, error) {
	if err := checkModelPath(path); err != nil {
		return 0, "", err
	}
	trimmed := strings.TrimRight(path, "/")
	if trimmed == "" {
		return m.root, ".", nil
	}
	i := strings.LastIndexByte(trimmed, '/')
	links := 0
	d, err := m.walk(c, m.nodes[m.root], trimmed[:i+1], true, &links)
	if err != nil {
		return 0, "", err
	}
	return d.ino, trimmed[i+1:], nil
}

func (m *Oracle) Lookup(c Cred, parent Ino, name string) (Attr, error) {
	d, err := m.dirNode(parent)
	if err != nil {
		return Attr{}, err
	}
	if err := apiName(name); err != nil {
		return Attr{}, err
	}
	if !permits(c, d, permX) {
		return Attr{}, syscall.EACCES
	}
	n, err := m.child(d, name)
	if err != nil {
		return Attr{}, err
	}
	return m.attr(n), nil
}

func (m *Oracle) GetAttr(ino Ino) (Attr, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return Attr{}, syscall.ENOENT
	}
	return m.attr(n), nil
}

func (m *Oracle) Readlink(ino Ino) (string, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return "", syscall.ENOENT
	}
	if n.typ != S_IFLNK {
		return "", syscall.EINVAL
	}
	return n.target, nil
}

func (m *Oracle) Readdir(c Cred, ino Ino, cursor string, limit int, withAttrs bool) ([]Dirent, string, bool, error) {
	d, err := m.dirNode(ino)
	if err != nil {
		return nil, "", false, err
	}
	if !permits(c, d, permR) {
		return nil, "", false, syscall.EACCES
	}
	if limit <= 0 {
		limit = 1024
	}
	var names []string
	for name := range d.ents {
		if name > cursor {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	eof := len(names) <= limit
	if !eof {
		names = names[:limit]
	}
	ents := []Dirent{}
	next := cursor
	for _, name := range names {
		n := m.nodes[d.ents[name]]
		ent := Dirent{Name: name, Ino: n.ino, Type: n.typ}
		if withAttrs {
			ent.Attr = m.attr(n)
		}
		ents = append(ents, ent)
		next = name
	}
	return ents, next, eof, nil
}

func (m *Oracle) Statfs() Statfs {
	var used uint64
	for _, n := range m.nodes {
		if n.typ == S_IFREG {
			used += n.size
		}
	}
	return Statfs{UsedBytes: used, UsedInodes: uint64(len(m.nodes)), BlockSize: 4096, MaxName: NameMax}
}

// Summary counts the subtree like `du --count-links`; every directory in it
// must be readable and searchable.
func (m *Oracle) Summary(c Cred, ino Ino) (Summary, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return Summary{}, syscall.ENOENT
	}
	var s Summary
	var visit func(n *node) error
	visit = func(n *node) error {
		if !n.dir() {
			s.Files++
			if n.typ == S_IFREG {
				s.Bytes += n.size
			}
			return nil
		}
		s.Dirs++
		if !permits(c, n, permR|permX) {
			return syscall.EACCES
		}
		for _, child := range n.ents {
			if err := visit(m.nodes[child]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := visit(n); err != nil {
		return Summary{}, err
	}
	return s, nil
}

// ---- namespace: creation ----
