package engine

// This file holds a reference model of the namespace's semantics, written
// from Linux's man pages and VFS code rather than from the engine, and a
// randomized test that applies the same operations to the engine and to the
// model and compares every result.
//
// The model favours obviousness over speed: link counts, parents and used
// bytes are recomputed from the entries whenever they are needed rather than
// maintained incrementally, and each operation checks its errors top to
// bottom in the order Linux's system call does.
//
// Each inode-level operation is modelled as its *at system call with a
// directory file descriptor for the parent (mkdirat(parent, name),
// renameat2(oldparent, name, newparent, newname), ...), and SetAttr,
// xattrs and Readdir as the f-variants on an open descriptor. Names with a
// '/' or a NUL, and the empty name, cannot be expressed there; for those the
// model follows the engine's documented contract (EINVAL, ENOENT).

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Linux limits, restated for the model. PATH_MAX (4096) counts the
// terminating NUL, so the longest path or symlink target is 4095 bytes.
const (
	mNameMax     = 255
	mPathMax     = 4096
	mSymlinkMax  = 40
	mLinkMax     = 65000
	mXattrName   = 255
	mXattrValue  = 65536
	mDirSize     = 4096
	permR        = 4
	permW        = 2
	permX        = 1
	mRenameNoRep = 1
	mRenameExch  = 2
)

type mnode struct {
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

func (n *mnode) dir() bool { return n.typ == S_IFDIR }

type model struct {
	part  uint16
	next  uint64
	root  Ino
	nodes map[Ino]*mnode
}

func newModel(p uint16, now int64) *model {
	m := &model{part: p, next: 2, root: MakeIno(p, 1), nodes: map[Ino]*mnode{}}
	m.nodes[m.root] = &mnode{
		ino: m.root, typ: S_IFDIR, perm: 0o755, parent: m.root,
		atime: now, mtime: now, ctime: now,
		xattrs: map[string][]byte{}, ents: map[string]Ino{},
	}
	return m
}

func (m *model) Root() Ino { return m.root }

// ---- derived state ----

// refs counts the directory entries that name ino.
func (m *model) refs(ino Ino) uint32 {
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

func (m *model) nlink(n *mnode) uint32 {
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
func (m *model) parentOf(d *mnode) *mnode { return m.nodes[d.parent] }

// derivedParent finds the directory holding directory d from the entries.
func (m *model) derivedParent(d *mnode) Ino {
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
func (m *model) ancestorOrSelf(a, d *mnode) bool {
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

func (m *model) attr(n *mnode) Attr {
	a := Attr{
		Ino: n.ino, Mode: n.typ | n.perm, UID: n.uid, GID: n.gid, Nlink: m.nlink(n),
		Atime: n.atime, Mtime: n.mtime, Ctime: n.ctime, Rdev: n.rdev,
	}
	switch n.typ {
	case S_IFDIR:
		a.Size = mDirSize
	case S_IFREG:
		a.Size = n.size
	case S_IFLNK:
		a.Size = uint64(len(n.target))
	}
	return a
}

// forget drops a node that no entry names any more.
func (m *model) forget(n *mnode) {
	if n.dir() || m.refs(n.ino) == 0 {
		delete(m.nodes, n.ino)
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

// permits is generic_permission: the owner class, else the group class,
// else the other class; root may do anything but execute a non-directory
// that has no execute bit at all.
func permits(c Cred, n *mnode, want uint32) bool {
	if c.UID == 0 {
		return want&permX == 0 || n.dir() || n.perm&0o111 != 0
	}
	var bits uint32
	switch {
	case c.UID == n.uid:
		bits = n.perm >> 6
	case inGroup(c, n.gid):
		bits = n.perm >> 3
	default:
		bits = n.perm
	}
	return bits&7&want == want
}

func ownerOrRoot(c Cred, n *mnode) bool { return c.UID == 0 || c.UID == n.uid }

// mMayDelete is may_delete without the type checks: write and search on the
// directory, and the sticky-bit rule.
func mMayDelete(c Cred, d, victim *mnode) error {
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
		if len(name) > mNameMax {
			return syscall.ENAMETOOLONG
		}
		return syscall.EINVAL
	}
	return nil
}

func isDotName(name string) bool { return name == "." || name == ".." }

func (m *model) dirNode(ino Ino) (*mnode, error) {
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
func (m *model) child(d *mnode, name string) (*mnode, error) {
	switch name {
	case ".":
		return d, nil
	case "..":
		return m.parentOf(d), nil
	}
	if len(name) > mNameMax {
		return nil, syscall.ENAMETOOLONG
	}
	ino, ok := d.ents[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	return m.nodes[ino], nil
}

// checkPath is getname's check plus the API's: a path is at most
// PATH_MAX-1 bytes, not empty, absolute and NUL-free.
func checkModelPath(path string) error {
	switch {
	case len(path) >= mPathMax:
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
func (m *model) walk(c Cred, start *mnode, path string, follow bool, links *int) (*mnode, error) {
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
			if *links > mSymlinkMax {
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

func (m *model) Resolve(c Cred, path string, follow bool) (Attr, error) {
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
func (m *model) ResolveParent(c Cred, path string) (Ino, string, error) {
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

func (m *model) Lookup(c Cred, parent Ino, name string) (Attr, error) {
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

func (m *model) GetAttr(ino Ino) (Attr, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return Attr{}, syscall.ENOENT
	}
	return m.attr(n), nil
}

func (m *model) Readlink(ino Ino) (string, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return "", syscall.ENOENT
	}
	if n.typ != S_IFLNK {
		return "", syscall.EINVAL
	}
	return n.target, nil
}

func (m *model) Readdir(c Cred, ino Ino, cursor string, limit int, withAttrs bool) ([]Dirent, string, bool, error) {
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

func (m *model) Statfs() Statfs {
	var used uint64
	for _, n := range m.nodes {
		if n.typ == S_IFREG {
			used += n.size
		}
	}
	return Statfs{UsedBytes: used, UsedInodes: uint64(len(m.nodes)), BlockSize: 4096, MaxName: mNameMax}
}

// Summary counts the subtree like `du --count-links`; every directory in it
// must be readable and searchable.
func (m *model) Summary(c Cred, ino Ino) (Summary, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return Summary{}, syscall.ENOENT
	}
	var s Summary
	var visit func(n *mnode) error
	visit = func(n *mnode) error {
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

// prepCreate is the part of mkdirat/mknodat/symlinkat/linkat that finds
// the new entry's slot: search the directory (EACCES), "." and ".." exist
// (EEXIST), the lookup (ENAMETOOLONG, EEXIST), then may_create's write
// permission (EACCES).
func (m *model) prepCreate(c Cred, parent Ino, name string) (*mnode, error) {
	d, err := m.dirNode(parent)
	if err != nil {
		return nil, err
	}
	if err := apiName(name); err != nil {
		return nil, err
	}
	if !permits(c, d, permX) {
		return nil, syscall.EACCES
	}
	if isDotName(name) {
		return nil, syscall.EEXIST
	}
	if len(name) > mNameMax {
		return nil, syscall.ENAMETOOLONG
	}
	if _, ok := d.ents[name]; ok {
		return nil, syscall.EEXIST
	}
	if !permits(c, d, permW|permX) {
		return nil, syscall.EACCES
	}
	return d, nil
}

// create makes a node in d the way inode_init_owner and mode_strip_sgid
// do: a set-group-id directory gives the new node its group, and a new
// directory its set-group-id bit; a group-executable set-group-id file made
// there by someone outside that group loses the bit.
func (m *model) create(c Cred, d *mnode, name string, typ, perm uint32, now int64) *mnode {
	gid := c.GID
	if d.perm&S_ISGID != 0 {
		gid = d.gid
		if typ == S_IFDIR {
			perm |= S_ISGID
		} else if perm&(S_ISGID|0o010) == S_ISGID|0o010 && c.UID != 0 && !inGroup(c, gid) {
			perm &^= S_ISGID
		}
	}
	n := &mnode{
		ino: MakeIno(m.part, m.next), typ: typ, perm: perm, uid: c.UID, gid: gid,
		atime: now, mtime: now, ctime: now, xattrs: map[string][]byte{},
	}
	m.next++
	if typ == S_IFDIR {
		n.ents = map[string]Ino{}
		n.parent = d.ino
	}
	m.nodes[n.ino] = n
	d.ents[name] = n.ino
	d.mtime, d.ctime = now, now
	return n
}

// Mkdir is mkdirat: only the permission bits and the sticky bit of mode
// are used (mkdir(2) NOTES; vfs_mkdir masks with S_IRWXUGO|S_ISVTX).
func (m *model) Mkdir(c Cred, parent Ino, name string, mode uint32, now int64) (Attr, error) {
	d, err := m.prepCreate(c, parent, name)
	if err != nil {
		return Attr{}, err
	}
	// No limit on subdirectories (like ext4's dir_nlink and tmpfs): a
	// directory's link count grows past MaxLinks.
	perm := mode & 0o1777
	return m.attr(m.create(c, d, name, S_IFDIR, perm, now)), nil
}

// Mknod is mknodat: may_mknod checks the type before the path (a
// directory is EPERM, an unknown type EINVAL); devices need CAP_MKNOD,
// checked in vfs_mknod after may_create.
func (m *model) Mknod(c Cred, parent Ino, name string, mode, rdev uint32, now int64) (Attr, error) {
	typ := mode & S_IFMT
	switch typ {
	case 0:
		typ = S_IFREG
	case S_IFREG, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK:
	case S_IFDIR:
		return Attr{}, syscall.EPERM
	default:
		return Attr{}, syscall.EINVAL
	}
	d, err := m.prepCreate(c, parent, name)
	if err != nil {
		return Attr{}, err
	}
	dev := typ == S_IFCHR || typ == S_IFBLK
	if dev && c.UID != 0 {
		return Attr{}, syscall.EPERM
	}
	n := m.create(c, d, name, typ, mode&0o7777, now)
	if dev {
		n.rdev = rdev
	}
	return m.attr(n), nil
}

// Symlink is symlinkat: the target is copied in first (ENOENT if empty,
// ENAMETOOLONG if it does not fit in PATH_MAX with its NUL).
func (m *model) Symlink(c Cred, parent Ino, name, target string, now int64) (Attr, error) {
	switch {
	case target == "":
		return Attr{}, syscall.ENOENT
	case len(target) >= mPathMax:
		return Attr{}, syscall.ENAMETOOLONG
	case strings.IndexByte(target, 0) >= 0:
		return Attr{}, syscall.EINVAL
	}
	d, err := m.prepCreate(c, parent, name)
	if err != nil {
		return Attr{}, err
	}
	n := m.create(c, d, name, S_IFLNK, 0o777, now)
	n.target = target
	return m.attr(n), nil
}

// Link is linkat: the new entry's checks (filename_create, may_create)
// come before vfs_link refuses a directory (EPERM) or a full link count.
func (m *model) Link(c Cred, ino Ino, newParent Ino, newName string, now int64) (Attr, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return Attr{}, syscall.ENOENT
	}
	d, err := m.prepCreate(c, newParent, newName)
	if err != nil {
		return Attr{}, err
	}
	if n.dir() {
		return Attr{}, syscall.EPERM
	}
	if m.nlink(n) >= mLinkMax {
		return Attr{}, syscall.EMLINK
	}
	d.ents[newName] = ino
	d.mtime, d.ctime = now, now
	n.ctime = now
	return m.attr(n), nil
}

// ---- namespace: removal ----

// prepRemove is do_unlinkat/do_rmdir up to the lookup: search the
// directory, then dotName decides "." and "..", then the lookup.
func (m *model) prepRemove(c Cred, parent Ino, name string, dotErr func(string) error) (*mnode, *mnode, error) {
	d, err := m.dirNode(parent)
	if err != nil {
		return nil, nil, err
	}
	if err := apiName(name); err != nil {
		return nil, nil, err
	}
	if !permits(c, d, permX) {
		return nil, nil, syscall.EACCES
	}
	if isDotName(name) {
		return nil, nil, dotErr(name)
	}
	v, err := m.child(d, name)
	if err != nil {
		return nil, nil, err
	}
	if err := mMayDelete(c, d, v); err != nil {
		return nil, nil, err
	}
	return d, v, nil
}

func (m *model) Unlink(c Cred, parent Ino, name string, now int64) error {
	d, v, err := m.prepRemove(c, parent, name, func(string) error { return syscall.EISDIR })
	if err != nil {
		return err
	}
	if v.dir() {
		return syscall.EISDIR
	}
	delete(d.ents, name)
	d.mtime, d.ctime = now, now
	v.ctime = now
	m.forget(v)
	return nil
}

func (m *model) Rmdir(c Cred, parent Ino, name string, now int64) error {
	d, v, err := m.prepRemove(c, parent, name, func(name string) error {
		if name == "." {
			return syscall.EINVAL
		}
		return syscall.ENOTEMPTY
	})
	if err != nil {
		return err
	}
	if !v.dir() {
		return syscall.ENOTDIR
	}
	if len(v.ents) > 0 {
		return syscall.ENOTEMPTY
	}
	delete(d.ents, name)
	d.mtime, d.ctime = now, now
	m.forget(v)
	return nil
}

// Rename is renameat2, following do_renameat2 and vfs_rename in order.
func (m *model) Rename(c Cred, parent Ino, name string, newParent Ino, newName string, flags uint32, now int64) error {
	if flags&^(mRenameNoRep|mRenameExch) != 0 || flags == mRenameNoRep|mRenameExch {
		return syscall.EINVAL
	}
	exchange := flags&mRenameExch != 0
	od, err := m.dirNode(parent)
	if err != nil {
		return err
	}
	if !permits(c, od, permX) {
		return syscall.EACCES
	}
	nd, err := m.dirNode(newParent)
	if err != nil {
		return err
	}
	if !permits(c, nd, permX) {
		return syscall.EACCES
	}
	// The last components' types: a "." or ".." source is EBUSY; a "."
	// or ".." target is EEXIST under RENAME_NOREPLACE, else EBUSY.
	if isDotName(name) {
		return syscall.EBUSY
	}
	if isDotName(newName) {
		if flags&mRenameNoRep != 0 {
			return syscall.EEXIST
		}
		return syscall.EBUSY
	}
	if err := apiName(name); err != nil {
		return err
	}
	if err := apiName(newName); err != nil {
		return err
	}
	// The source is looked up (and must exist) before the target is.
	src, err := m.child(od, name)
	if err != nil {
		return err
	}
	if len(newName) > mNameMax {
		return syscall.ENAMETOOLONG
	}
	var dst *mnode
	if ino, ok := nd.ents[newName]; ok {
		dst = m.nodes[ino]
	}
	if flags&mRenameNoRep != 0 && dst != nil {
		return syscall.EEXIST
	}
	if exchange && dst == nil {
		return syscall.ENOENT
	}
	// lock_rename's trap: the source may not be an ancestor of the new
	// parent, nor the target one of the old parent.
	if od != nd {
		if src.dir() && m.ancestorOrSelf(src, nd) {
			return syscall.EINVAL
		}
		if dst != nil && dst.dir() && m.ancestorOrSelf(dst, od) {
			if exchange {
				return syscall.EINVAL
			}
			return syscall.ENOTEMPTY
		}
	}
	if src == dst {
		return nil
	}
	if err := mMayDelete(c, od, src); err != nil {
		return err
	}
	if dst == nil {
		if !permits(c, nd, permW|permX) {
			return syscall.EACCES
		}
	} else {
		if err := mMayDelete(c, nd, dst); err != nil {
			return err
		}
		if !exchange {
			if src.dir() && !dst.dir() {
				return syscall.ENOTDIR
			}
			if !src.dir() && dst.dir() {
				return syscall.EISDIR
			}
		}
	}
	if od != nd {
		if src.dir() && !permits(c, src, permW) {
			return syscall.EACCES
		}
		if exchange && dst.dir() && !permits(c, dst, permW) {
			return syscall.EACCES
		}
	}
	if !exchange && dst != nil && dst.dir() && len(dst.ents) > 0 {
		return syscall.ENOTEMPTY
	}
	if exchange {
		od.ents[name], nd.ents[newName] = dst.ino, src.ino
		dst.ctime = now
		if dst.dir() {
			dst.parent = od.ino
		}
	} else {
		delete(od.ents, name)
		nd.ents[newName] = src.ino
		if dst != nil {
			dst.ctime = now
			m.forget(dst)
		}
	}
	src.ctime = now
	if src.dir() {
		src.parent = nd.ino
	}
	od.mtime, od.ctime = now, now
	nd.mtime, nd.ctime = now, now
	return nil
}

// ---- namespace: attributes ----

// dropSGID is setattr_should_drop_sgid (Linux 6.2 and later): a
// set-group-id bit goes if the group may execute, or if the caller is
// neither in the file's group nor privileged.
func dropSGID(c Cred, perm, gid uint32) bool {
	if perm&S_ISGID == 0 {
		return false
	}
	return perm&0o010 != 0 || (c.UID != 0 && !inGroup(c, gid))
}

// SetAttr is one of chmod, chown, truncate and utimensat on a descriptor,
// with their checks: notify_change refuses a mode change on a symlink
// (EOPNOTSUPP, Linux 6.6 and later); truncate needs a regular file
// (EISDIR, EINVAL) and write permission (EACCES); setattr_prepare lets a
// non-root caller "change" the owner only to itself when it owns the node,
// and the group only to one of its groups (EPERM); chmod needs ownership
// (EPERM); setting times to anything but "both now" needs ownership
// (EPERM), "both now" needs ownership or write permission (EACCES).
func (m *model) SetAttr(c Cred, ino Ino, s SetAttr, now int64) (Attr, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return Attr{}, syscall.ENOENT
	}
	v := s.Valid
	root := c.UID == 0
	owner := ownerOrRoot(c, n)
	if v&SetMode != 0 && n.typ == S_IFLNK {
		return Attr{}, syscall.EOPNOTSUPP
	}
	if v&SetSize != 0 {
		switch {
		case n.dir():
			return Attr{}, syscall.EISDIR
		case n.typ != S_IFREG:
			return Attr{}, syscall.EINVAL
		case !permits(c, n, permW):
			return Attr{}, syscall.EACCES
		}
	}
	if v&SetUID != 0 && !root && !(c.UID == n.uid && s.UID == n.uid) {
		return Attr{}, syscall.EPERM
	}
	if v&SetGID != 0 && !root && !(c.UID == n.uid && (s.GID == n.gid || inGroup(c, s.GID))) {
		return Attr{}, syscall.EPERM
	}
	if v&SetMode != 0 && !owner {
		return Attr{}, syscall.EPERM
	}
	if v&(SetAtime|SetMtime|SetAtimeNow|SetMtimeNow) != 0 {
		touch := v&(SetAtime|SetMtime|SetAtimeNow|SetMtimeNow) == SetAtimeNow|SetMtimeNow
		switch {
		case touch && !owner && !permits(c, n, permW):
			return Attr{}, syscall.EACCES
		case !touch && !owner:
			return Attr{}, syscall.EPERM
		}
	}
	if v == 0 {
		return m.attr(n), nil
	}
	if v&(SetUID|SetGID) != 0 {
		oldGID := n.gid
		if v&SetUID != 0 {
			n.uid = s.UID
		}
		if v&SetGID != 0 {
			n.gid = s.GID
		}
		if !n.dir() {
			if dropSGID(c, n.perm, oldGID) {
				n.perm &^= S_ISGID
			}
			n.perm &^= S_ISUID
		}
	}
	if v&SetMode != 0 {
		n.perm = s.Mode & 0o7777
		if !root && !inGroup(c, n.gid) {
			n.perm &^= S_ISGID
		}
	}
	if v&SetSize != 0 {
		if !root {
			if dropSGID(c, n.perm, n.gid) {
				n.perm &^= S_ISGID
			}
			n.perm &^= S_ISUID
		}
		n.size = s.Size
		n.mtime = now
	}
	switch {
	case v&SetAtimeNow != 0:
		n.atime = now
	case v&SetAtime != 0:
		n.atime = s.Atime
	}
	switch {
	case v&SetMtimeNow != 0:
		n.mtime = now
	case v&SetMtime != 0:
		n.mtime = s.Mtime
	}
	n.ctime = now
	return m.attr(n), nil
}

// ---- namespace: extended attributes ----

// checkXattrNameLen is the copy-in of the name: empty or longer than
// XATTR_NAME_MAX is ERANGE.
func checkXattrNameLen(name string) error {
	if name == "" || len(name) > mXattrName {
		return syscall.ERANGE
	}
	return nil
}

// xattrPerm is xattr_permission (write: mayWrite) followed, for writes, by
// the capability hook that reserves security.* to CAP_SYS_ADMIN.
func xattrPerm(c Cred, n *mnode, name string, write bool) error {
	want := uint32(permR)
	if write {
		want = permW
	}
	switch {
	case strings.HasPrefix(name, "security.") || strings.HasPrefix(name, "system."):
		if write && strings.HasPrefix(name, "security.") && c.UID != 0 {
			return syscall.EPERM
		}
		return nil
	case strings.HasPrefix(name, "trusted."):
		if c.UID != 0 {
			if write {
				return syscall.EPERM
			}
			return syscall.ENODATA
		}
		return nil
	case strings.HasPrefix(name, "user."):
		if n.typ != S_IFREG && !n.dir() {
			if write {
				return syscall.EPERM
			}
			return syscall.ENODATA
		}
		if write && n.dir() && n.perm&S_ISVTX != 0 && !ownerOrRoot(c, n) {
			return syscall.EPERM
		}
	}
	if !permits(c, n, want) {
		return syscall.EACCES
	}
	return nil
}

// xattrHandler is xattr_resolve_name: the user, trusted and security
// namespaces exist (system.* would be POSIX ACLs, which are not kept); a
// bare prefix is EINVAL.
func xattrHandler(name string) error {
	for _, ns := range []string{"user.", "trusted.", "security."} {
		if strings.HasPrefix(name, ns) {
			if name == ns {
				return syscall.EINVAL
			}
			return nil
		}
	}
	return syscall.EOPNOTSUPP
}

func (m *model) GetXattr(c Cred, ino Ino, name string) ([]byte, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return nil, syscall.ENOENT
	}
	if err := checkXattrNameLen(name); err != nil {
		return nil, err
	}
	if err := xattrPerm(c, n, name, false); err != nil {
		return nil, err
	}
	if err := xattrHandler(name); err != nil {
		return nil, err
	}
	v, ok := n.xattrs[name]
	if !ok {
		return nil, syscall.ENODATA
	}
	return v, nil
}

// SetXattr is setxattr: unknown flag bits are EINVAL; XATTR_CREATE and
// XATTR_REPLACE together are not, they just can never both hold.
func (m *model) SetXattr(c Cred, ino Ino, name string, value []byte, flags uint32, now int64) error {
	n, ok := m.nodes[ino]
	if !ok {
		return syscall.ENOENT
	}
	if flags&^(XattrCreate|XattrReplace) != 0 {
		return syscall.EINVAL
	}
	if err := checkXattrNameLen(name); err != nil {
		return err
	}
	if len(value) > mXattrValue {
		return syscall.E2BIG
	}
	if err := xattrPerm(c, n, name, true); err != nil {
		return err
	}
	if err := xattrHandler(name); err != nil {
		return err
	}
	_, exists := n.xattrs[name]
	if exists && flags&XattrCreate != 0 {
		return syscall.EEXIST
	}
	if !exists && flags&XattrReplace != 0 {
		return syscall.ENODATA
	}
	n.xattrs[name] = append([]byte(nil), value...)
	n.ctime = now
	return nil
}

func (m *model) ListXattr(c Cred, ino Ino) ([]string, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return nil, syscall.ENOENT
	}
	names := []string{}
	for name := range n.xattrs {
		if c.UID != 0 && strings.HasPrefix(name, "trusted.") {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

func (m *model) RemoveXattr(c Cred, ino Ino, name string, now int64) error {
	n, ok := m.nodes[ino]
	if !ok {
		return syscall.ENOENT
	}
	if err := checkXattrNameLen(name); err != nil {
		return err
	}
	if err := xattrPerm(c, n, name, true); err != nil {
		return err
	}
	if err := xattrHandler(name); err != nil {
		return err
	}
	if _, ok := n.xattrs[name]; !ok {
		return syscall.ENODATA
	}
	delete(n.xattrs, name)
	n.ctime = now
	return nil
}

var _ namespace = (*model)(nil)

// ---- the randomized test ----

var (
	flagSeed  = flag.Int64("seed", 0, "TestModel: run only this seed (0: the default seeds)")
	flagSteps = flag.Int("steps", 0, "TestModel: steps per seed (0: the default)")
	flagSeeds = flag.Int("seeds", 0, "TestModel: number of default seeds to run (0: the default)")
)

// modelVariant is one way of running the randomized test: the pool of
// names directories are built from, and whether the idle sweep packs every
// directory after every step (so that every operation meets packed
// directories and inflates them).
type modelVariant struct {
	name    string
	names   []string
	compact bool
	seeds   int // default seeds to run
}

var modelVariants = []modelVariant{
	{name: "small", names: modelNames, seeds: defaultModelSeeds},
	{name: "compact", names: modelNames, compact: true, seeds: 4},
	{name: "wide", names: wideNames, seeds: 4},
	{name: "wide-compact", names: wideNames, compact: true, seeds: 4},
}

// wideNames lets directories grow past smallDir entries, so that their
// entry index is built, grown, shrunk and dropped.
var wideNames = func() []string {
	names := make([]string, 40)
	for i := range names {
		names[i] = fmt.Sprintf("n%02d", i)
	}
	return names
}()

const (
	defaultModelSeeds = 16
	defaultModelSteps = 5000
	modelPartition    = 7
)

// TestModel applies the same random operations to the engine and to the
// model and compares every result, then the whole trees. Reproduce a
// failure with go test -run TestModel -seed=N (-steps=M).
func TestModel(t *testing.T) {
	steps := defaultModelSteps
	if *flagSteps > 0 {
		steps = *flagSteps
	}
	for _, v := range modelVariants {
		t.Run(v.name, func(t *testing.T) { runModel(t, v, steps) })
	}
}

func runModel(t *testing.T, v modelVariant, steps int) {
	seeds := []int64{}
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		k := v.seeds
		if *flagSeeds > 0 {
			k = *flagSeeds
		}
		for i := 1; i <= k; i++ {
			seeds = append(seeds, int64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			start := time.Now()
			d := newDriver(seed)
			d.names, d.compact = v.names, v.compact
			if step, err := d.run(steps); err != nil {
				t.Fatalf("seed %d, step %d: %v\n%s\nreproduce: go test ./internal/engine -run 'TestModel/%s' -seed=%d -steps=%d",
					seed, step, err, d.history(), v.name, seed, step)
			}
			t.Logf("seed %d: %d steps in %v, %d nodes at the end", seed, steps, time.Since(start).Round(time.Millisecond), len(d.m.nodes))
			if testing.Verbose() {
				keys := make([]string, 0, len(d.stats))
				for k := range d.stats {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				var b strings.Builder
				for _, k := range keys {
					fmt.Fprintf(&b, "  %-28s %d\n", k, d.stats[k])
				}
				t.Logf("outcomes (model):\n%s", b.String())
			}
		})
	}
}

// driver holds the engine and the model under the same operations.
type driver struct {
	rng   *rand.Rand
	e     *Engine
	m     *model
	now   int64
	step  int
	log   []string       // recent operations and their results
	stats map[string]int // "op result" -> count, for -v

	names   []string // the pool of ordinary names
	compact bool     // pack every directory after every step
}

func newDriver(seed int64) *driver {
	const t0 = 1_000_000
	return &driver{
		rng:   rand.New(rand.NewSource(seed)),
		e:     New(modelPartition, t0),
		m:     newModel(modelPartition, t0),
		now:   t0,
		stats: map[string]int{},
		names: modelNames,
	}
}

func (d *driver) record(s string) {
	d.log = append(d.log, fmt.Sprintf("step %d t=%d: %s", d.step, d.now, s))
	if len(d.log) > 25 {
		d.log = d.log[1:]
	}
}

func (d *driver) history() string {
	return "last operations:\n  " + strings.Join(d.log, "\n  ")
}

// run applies steps random operations; it returns the failing step and
// what differed.
func (d *driver) run(steps int) (int, error) {
	// Make the root writable to everyone, so that the non-root callers
	// build trees of their own.
	d.step, d.now = 0, d.now+1
	if err := d.opSetAttr(credRoot, "/", true, SetAttr{Valid: SetMode, Mode: 0o777}); err != nil {
		return 0, err
	}
	for d.step = 1; d.step <= steps; d.step++ {
		d.now += 1000
		if err := d.randomOp(); err != nil {
			return d.step, err
		}
		if d.compact {
			if err := d.packAll(); err != nil {
				return d.step, err
			}
		}
		if err := d.e.Check(); err != nil {
			return d.step, fmt.Errorf("engine Check: %v", err)
		}
		if d.step%10 == 0 || d.step == steps {
			if err := d.compareTrees(); err != nil {
				return d.step, err
			}
		}
	}
	return steps, nil
}

// packAll runs the idle sweep until it has nothing left to do: every
// directory with entries is packed by then, and must still be.
func (d *driver) packAll() error {
	for d.e.CompactIdle(1<<20) > 0 {
	}
	for ino, n := range d.e.st.all() {
		if x := d.e.st.extraOf(n); n.isDir() && x.dir.live > 0 && x.dir.packed == nil {
			return fmt.Errorf("dir %d with %d entries not packed after the sweep", ino, x.dir.live)
		}
	}
	return nil
}

// ---- random choices ----

var (
	modelNames  = []string{"a", "b", "c", "d", "e"}
	long255     = strings.Repeat("n", 255)
	long256     = strings.Repeat("o", 256)
	dirModes    = []uint32{0o755, 0o777, 0o700, 0o711, 0o555, 0o311, 0o1777, 0o2775, 0o3777, 0o750, 0o770, 0o4755, 0o2755, 0, 0o1733}
	fileModes   = []uint32{0o644, 0o666, 0o600, 0o755, 0o4755, 0o2755, 0o2745, 0o6777, 0o444, 0, 0o1644, 0o2666, 0o4700}
	modelIDs    = []uint32{0, 1000, 1001, 2000, 3000}
	modelSizes  = []uint64{0, 1, 100, 4096, 1 << 20}
	xattrNames  = []string{"user.a", "user.b", "user.a", "trusted.t", "security.s", "system.x", "user.", "trusted.", "foo", "", "user." + strings.Repeat("x", 251), "user." + strings.Repeat("y", 250)}
	modelCreds  = []Cred{credRoot, credRoot, credRoot, credU1, credU1, credU1, credU2, credU2}
	badNames    = []string{".", "..", "", "x/y", long255, long256, "nul\x00"}
	xattrValues = [][]byte{nil, []byte("v"), []byte("value2"), bytes.Repeat([]byte("z"), 300)}
)

func (d *driver) pick(n int) int { return d.rng.Intn(n) }

func (d *driver) chance(pct int) bool { return d.rng.Intn(100) < pct }

func (d *driver) cred() Cred { return modelCreds[d.pick(len(modelCreds))] }

// name returns a name from the small pool, or now and then an odd one.
func (d *driver) name() string {
	if d.chance(6) {
		return badNames[d.pick(len(badNames))]
	}
	return d.names[d.pick(len(d.names))]
}

// comp is a path component: mostly pool names, sometimes "." / ".." or a
// long one.
func (d *driver) comp() string {
	switch {
	case d.chance(3):
		return "."
	case d.chance(4):
		return ".."
	case d.chance(1):
		return long255
	case d.chance(1):
		return long256
	}
	return d.names[d.pick(len(d.names))]
}

// path returns an absolute path of one to three components, sometimes with
// a trailing or doubled slash, rarely the root or an over-long path.
func (d *driver) path() string {
	switch {
	case d.chance(1):
		return "/"
	case d.chance(1):
		return []string{"", "a", "a/b", "/a\x00b", "./a"}[d.pick(5)]
	}
	if d.chance(1) {
		return strings.Repeat("/", mPathMax-1+d.pick(3))
	}
	k := 1 + d.pick(3)
	if d.chance(60) {
		k = 1 + d.pick(2)
	}
	var b strings.Builder
	for i := 0; i < k; i++ {
		b.WriteByte('/')
		if d.chance(2) {
			b.WriteByte('/')
		}
		b.WriteString(d.comp())
	}
	if d.chance(5) {
		b.WriteByte('/')
	}
	return b.String()
}

// existing returns, half of the time, the path of a node that exists in
// the model and has one of the given types (any type if none), and a
// random path otherwise.
func (d *driver) existing(types ...uint32) string {
	if d.chance(50) {
		return d.path()
	}
	var paths []string
	var walk func(prefix string, n *mnode)
	walk = func(prefix string, n *mnode) {
		names := make([]string, 0, len(n.ents))
		for name := range n.ents {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			child := d.m.nodes[n.ents[name]]
			p := prefix + "/" + name
			ok := len(types) == 0
			for _, t := range types {
				ok = ok || child.typ == t
			}
			if ok {
				paths = append(paths, p)
			}
			if child.dir() {
				walk(p, child)
			}
		}
	}
	walk("", d.m.nodes[d.m.root])
	if len(paths) == 0 {
		return d.path()
	}
	return paths[d.pick(len(paths))]
}

// target returns a symlink target: relative or absolute, sometimes
// pointing at itself or up the tree, rarely invalid.
func (d *driver) target() string {
	switch {
	case d.chance(2):
		return []string{"", "a\x00"}[d.pick(2)]
	case d.chance(1):
		return strings.Repeat("t", mPathMax-1+d.pick(3))
	case d.chance(40):
		return d.path()
	}
	k := 1 + d.pick(2)
	parts := make([]string, k)
	for i := range parts {
		parts[i] = d.comp()
	}
	s := strings.Join(parts, "/")
	if d.chance(10) {
		s += "/"
	}
	return s
}

func (d *driver) mode(modes []uint32) uint32 {
	if d.chance(10) {
		return uint32(d.rng.Intn(0o10000))
	}
	return modes[d.pick(len(modes))]
}

// ---- operations ----

func (d *driver) randomOp() error {
	c := d.cred()
	switch w := d.pick(100); {
	case w < 12:
		return d.opMkdir(c, d.path(), d.mode(dirModes))
	case w < 22:
		return d.opMknod(c)
	case w < 28:
		return d.opSymlink(c, d.target(), d.path())
	case w < 33:
		return d.opLink(c, d.existing(S_IFREG, S_IFIFO, S_IFSOCK, S_IFLNK, S_IFCHR), d.path())
	case w < 40:
		return d.opUnlink(c, d.existing())
	case w < 45:
		return d.opRmdir(c, d.existing(S_IFDIR))
	case w < 58:
		flags := uint32(0)
		switch r := d.pick(20); {
		case r < 4:
			flags = RenameNoReplace
		case r < 8:
			flags = RenameExchange
		case r == 8:
			flags = uint32(1 + d.pick(7))
		}
		return d.opRename(c, d.existing(), d.path(), flags)
	case w < 70:
		return d.opSetAttr(c, d.existing(), !d.chance(10), d.setattr())
	case w < 80:
		return d.opXattr(c)
	case w < 84:
		return d.opLookup(c)
	case w < 91:
		return d.opResolve(c, d.path(), d.chance(50))
	case w < 95:
		return d.opReaddir(c)
	case w < 96:
		return d.opSummary(c)
	case w < 97:
		return d.opStatfs()
	case w < 98:
		return d.opReadlink(c)
	default:
		return d.opInode(c)
	}
}

// same compares one operation's outcome on both sides.
func (d *driver) same(op string, eErr, mErr error, eA, mA *Attr) error {
	res := errName(eErr)
	if eErr == nil && eA != nil {
		res += " " + fmtAttr(*eA)
	}
	d.record(op + " -> " + res)
	kind, _, _ := strings.Cut(op, " ")
	d.stats[kind+" "+errName(mErr)]++
	if errName(eErr) != errName(mErr) {
		return fmt.Errorf("%s: engine %s, Linux (model) %s", op, errName(eErr), errName(mErr))
	}
	if eErr == nil && eA != nil && *eA != *mA {
		return fmt.Errorf("%s: attributes differ\n  engine %s\n  model  %s", op, fmtAttr(*eA), fmtAttr(*mA))
	}
	return nil
}

func (d *driver) opMkdir(c Cred, path string, mode uint32) error {
	op := fmt.Sprintf("mkdir %q %#o as %s", abbrev(path), mode, credName(c))
	ea, ee := pathMkdir(d.e, c, path, mode, d.now)
	ma, me := pathMkdir(d.m, c, path, mode, d.now)
	return d.same(op, ee, me, &ea, &ma)
}

func (d *driver) opMknod(c Cred) error {
	path := d.path()
	perm := d.mode(fileModes)
	var typ uint32
	switch r := d.pick(100); {
	case r < 55:
		typ = S_IFREG
	case r < 65:
		typ = 0
	case r < 77:
		typ = S_IFIFO
	case r < 86:
		typ = S_IFSOCK
	case r < 91:
		typ = S_IFCHR
	case r < 94:
		typ = S_IFBLK
	case r < 97:
		typ = S_IFDIR
	case r < 99:
		typ = S_IFLNK
	default:
		typ = 0o030000
	}
	rdev := uint32(d.pick(3)) << 8
	op := fmt.Sprintf("mknod %q %s %#o rdev=%d as %s", abbrev(path), typeName(typ), perm, rdev, credName(c))
	ea, ee := pathMknod(d.e, c, path, typ|perm, rdev, d.now)
	ma, me := pathMknod(d.m, c, path, typ|perm, rdev, d.now)
	return d.same(op, ee, me, &ea, &ma)
}

func (d *driver) opSymlink(c Cred, target, path string) error {
	op := fmt.Sprintf("symlink %q -> %q as %s", abbrev(path), shorten(target), credName(c))
	ea, ee := pathSymlink(d.e, c, target, path, d.now)
	ma, me := pathSymlink(d.m, c, target, path, d.now)
	return d.same(op, ee, me, &ea, &ma)
}

func (d *driver) opLink(c Cred, oldPath, newPath string) error {
	op := fmt.Sprintf("link %q %q as %s", abbrev(oldPath), abbrev(newPath), credName(c))
	ea, ee := pathLink(d.e, c, oldPath, newPath, d.now)
	ma, me := pathLink(d.m, c, oldPath, newPath, d.now)
	return d.same(op, ee, me, &ea, &ma)
}

func (d *driver) opUnlink(c Cred, path string) error {
	op := fmt.Sprintf("unlink %q as %s", abbrev(path), credName(c))
	return d.same(op, pathUnlink(d.e, c, path, d.now), pathUnlink(d.m, c, path, d.now), nil, nil)
}

func (d *driver) opRmdir(c Cred, path string) error {
	op := fmt.Sprintf("rmdir %q as %s", abbrev(path), credName(c))
	return d.same(op, pathRmdir(d.e, c, path, d.now), pathRmdir(d.m, c, path, d.now), nil, nil)
}

func (d *driver) opRename(c Cred, oldPath, newPath string, flags uint32) error {
	op := fmt.Sprintf("rename %q %q flags=%d as %s", abbrev(oldPath), abbrev(newPath), flags, credName(c))
	ee := pathRename(d.e, c, oldPath, newPath, flags, d.now)
	me := pathRename(d.m, c, oldPath, newPath, flags, d.now)
	return d.same(op, ee, me, nil, nil)
}

func (d *driver) setattr() SetAttr {
	id := func() uint32 { return modelIDs[d.pick(len(modelIDs))] }
	ts := func() int64 { return int64(d.pick(5)) * 7777 }
	switch d.pick(9) {
	case 0, 1:
		return SetAttr{Valid: SetMode, Mode: d.mode(append(dirModes, fileModes...))}
	case 2:
		return SetAttr{Valid: SetUID, UID: id()}
	case 3:
		return SetAttr{Valid: SetGID, GID: id()}
	case 4:
		return SetAttr{Valid: SetUID | SetGID, UID: id(), GID: id()}
	case 5, 6:
		return SetAttr{Valid: SetSize, Size: modelSizes[d.pick(len(modelSizes))]}
	case 7:
		variants := []SetAttr{
			{Valid: SetAtime, Atime: ts()},
			{Valid: SetMtime, Mtime: ts()},
			{Valid: SetAtime | SetMtime, Atime: ts(), Mtime: ts()},
			{Valid: SetAtimeNow},
			{Valid: SetMtimeNow},
			{Valid: SetAtimeNow | SetMtimeNow},
			{Valid: SetAtimeNow | SetMtime, Mtime: ts()},
		}
		return variants[d.pick(len(variants))]
	default:
		return SetAttr{}
	}
}

func (d *driver) opSetAttr(c Cred, path string, follow bool, s SetAttr) error {
	op := fmt.Sprintf("setattr %q follow=%v %+v as %s", abbrev(path), follow, s, credName(c))
	ea, ee := pathSetAttr(d.e, c, path, follow, s, d.now)
	ma, me := pathSetAttr(d.m, c, path, follow, s, d.now)
	return d.same(op, ee, me, &ea, &ma)
}

// opXattr resolves a path (following a final symlink unless it plays
// lgetxattr and friends) and runs one xattr call on it.
func (d *driver) opXattr(c Cred) error {
	path, follow := d.existing(), !d.chance(15)
	ea, ee := d.e.Resolve(c, path, follow)
	ma, me := d.m.Resolve(c, path, follow)
	name := xattrNames[d.pick(len(xattrNames))]
	if d.chance(50) {
		name = xattrNames[d.pick(5)]
	}
	var op string
	var eErr, mErr error
	var eOut, mOut string
	switch k := d.pick(10); {
	case k < 4:
		value := xattrValues[d.pick(len(xattrValues))]
		if d.chance(2) {
			value = make([]byte, mXattrValue+1)
		}
		flags := uint32(0)
		switch r := d.pick(10); {
		case r < 2:
			flags = XattrCreate
		case r < 4:
			flags = XattrReplace
		case r == 4:
			flags = XattrCreate | XattrReplace
		case r == 5:
			flags = 4
		}
		op = fmt.Sprintf("setxattr %q follow=%v %q len=%d flags=%d as %s", abbrev(path), follow, shorten(name), len(value), flags, credName(c))
		if ee == nil {
			eErr = d.e.SetXattr(c, ea.Ino, name, value, flags, d.now)
		}
		if me == nil {
			mErr = d.m.SetXattr(c, ma.Ino, name, value, flags, d.now)
		}
	case k < 7:
		op = fmt.Sprintf("getxattr %q follow=%v %q as %s", abbrev(path), follow, shorten(name), credName(c))
		if ee == nil {
			var v []byte
			v, eErr = d.e.GetXattr(c, ea.Ino, name)
			eOut = string(v)
		}
		if me == nil {
			var v []byte
			v, mErr = d.m.GetXattr(c, ma.Ino, name)
			mOut = string(v)
		}
	case k < 8:
		op = fmt.Sprintf("listxattr %q follow=%v as %s", abbrev(path), follow, credName(c))
		if ee == nil {
			var l []string
			l, eErr = d.e.ListXattr(c, ea.Ino)
			eOut = fmt.Sprintf("%q", l)
		}
		if me == nil {
			var l []string
			l, mErr = d.m.ListXattr(c, ma.Ino)
			mOut = fmt.Sprintf("%q", l)
		}
	default:
		op = fmt.Sprintf("removexattr %q follow=%v %q as %s", abbrev(path), follow, shorten(name), credName(c))
		if ee == nil {
			eErr = d.e.RemoveXattr(c, ea.Ino, name, d.now)
		}
		if me == nil {
			mErr = d.m.RemoveXattr(c, ma.Ino, name, d.now)
		}
	}
	if ee != nil {
		eErr = ee
	}
	if me != nil {
		mErr = me
	}
	if err := d.same(op, eErr, mErr, nil, nil); err != nil {
		return err
	}
	if eErr == nil && eOut != mOut {
		return fmt.Errorf("%s: engine %q, model %q", op, shorten(eOut), shorten(mOut))
	}
	return nil
}

// resolveBoth resolves path on both sides.
func (d *driver) resolveBoth(c Cred, path string, follow bool) (ea, ma Attr, ee, me error) {
	ea, ee = d.e.Resolve(c, path, follow)
	ma, me = d.m.Resolve(c, path, follow)
	return
}

func (d *driver) opLookup(c Cred) error {
	path, name := d.path(), d.name()
	// The directory is found as root, so that the lookup itself is what
	// the caller's permissions decide.
	ea, ma, ee, me := d.resolveBoth(credRoot, path, true)
	if err := d.same(fmt.Sprintf("resolve %q as root", abbrev(path)), ee, me, &ea, &ma); err != nil || ee != nil {
		return err
	}
	op := fmt.Sprintf("lookup %q in %q as %s", shorten(name), abbrev(path), credName(c))
	ea, ee = d.e.Lookup(c, ea.Ino, name)
	ma, me = d.m.Lookup(c, ma.Ino, name)
	return d.same(op, ee, me, &ea, &ma)
}

func (d *driver) opResolve(c Cred, path string, follow bool) error {
	op := fmt.Sprintf("resolve %q follow=%v as %s", abbrev(path), follow, credName(c))
	ea, ma, ee, me := d.resolveBoth(c, path, follow)
	return d.same(op, ee, me, &ea, &ma)
}

func (d *driver) opReaddir(c Cred) error {
	path := d.path()
	ea, ma, ee, me := d.resolveBoth(credRoot, path, true)
	if err := d.same(fmt.Sprintf("resolve %q as root", abbrev(path)), ee, me, &ea, &ma); err != nil || ee != nil {
		return err
	}
	cursor := ""
	if d.chance(50) {
		cursor = d.name()
	}
	limit := d.pick(5)
	withAttrs := d.chance(50)
	op := fmt.Sprintf("readdir %q cursor=%q limit=%d attrs=%v as %s", abbrev(path), shorten(cursor), limit, withAttrs, credName(c))
	eEnts, eNext, eEOF, ee := d.e.Readdir(c, ea.Ino, cursor, limit, withAttrs)
	mEnts, mNext, mEOF, me := d.m.Readdir(c, ma.Ino, cursor, limit, withAttrs)
	if err := d.same(op, ee, me, nil, nil); err != nil || ee != nil {
		return err
	}
	if eNext != mNext || eEOF != mEOF || !sameDirents(eEnts, mEnts) {
		return fmt.Errorf("%s:\n  engine next=%q eof=%v %s\n  model  next=%q eof=%v %s",
			op, eNext, eEOF, fmtDirents(eEnts), mNext, mEOF, fmtDirents(mEnts))
	}
	return nil
}

func (d *driver) opSummary(c Cred) error {
	path := d.path()
	ea, ma, ee, me := d.resolveBoth(credRoot, path, true)
	if err := d.same(fmt.Sprintf("resolve %q as root", abbrev(path)), ee, me, &ea, &ma); err != nil || ee != nil {
		return err
	}
	op := fmt.Sprintf("summary %q as %s", abbrev(path), credName(c))
	es, ee := d.e.Summary(c, ea.Ino)
	ms, me := d.m.Summary(c, ma.Ino)
	if err := d.same(op, ee, me, nil, nil); err != nil {
		return err
	}
	if es != ms {
		return fmt.Errorf("%s: engine %+v, model %+v", op, es, ms)
	}
	return nil
}

func (d *driver) opStatfs() error {
	d.record("statfs")
	es, ms := d.e.Statfs(), d.m.Statfs()
	if es.UsedBytes != ms.UsedBytes || es.UsedInodes != ms.UsedInodes || es.BlockSize != ms.BlockSize || es.MaxName != ms.MaxName {
		return fmt.Errorf("statfs: engine %+v, model %+v", es, ms)
	}
	return nil
}

func (d *driver) opReadlink(c Cred) error {
	path := d.existing(S_IFLNK)
	ea, ma, ee, me := d.resolveBoth(c, path, false)
	op := fmt.Sprintf("readlink %q as %s", abbrev(path), credName(c))
	if ee == nil && me == nil {
		var eT, mT string
		eT, ee = d.e.Readlink(ea.Ino)
		mT, me = d.m.Readlink(ma.Ino)
		if ee == nil && me == nil && eT != mT {
			return fmt.Errorf("%s: engine %q, model %q", op, eT, mT)
		}
	}
	return d.same(op, ee, me, nil, nil)
}

// inoPick returns an inode number: mostly a live directory's, else any
// live node's, one never handed out, or one of another partition.
func (d *driver) inoPick(dirs bool) Ino {
	var live, liveDirs []Ino
	for ino, n := range d.m.nodes {
		live = append(live, ino)
		if n.dir() {
			liveDirs = append(liveDirs, ino)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i] < live[j] })
	sort.Slice(liveDirs, func(i, j int) bool { return liveDirs[i] < liveDirs[j] })
	switch r := d.pick(100); {
	case dirs || r < 50:
		return liveDirs[d.pick(len(liveDirs))]
	case r < 80:
		return live[d.pick(len(live))]
	case r < 95:
		return MakeIno(modelPartition, uint64(d.pick(int(d.m.next)+3)))
	default:
		return MakeIno(modelPartition+1, 1)
	}
}

// opInode calls the inode-level operations directly, with parents that
// may be stale or not directories, and names that no path could carry.
func (d *driver) opInode(c Cred) error {
	ino, ino2 := d.inoPick(false), d.inoPick(false)
	name, name2 := d.name(), d.name()
	if d.chance(30) {
		name = badNames[d.pick(len(badNames))]
	}
	now := d.now
	attr := func(a Attr, err error) (string, error) { return fmtAttr(a), err }
	type call struct {
		op string
		f  func(fs namespace) (string, error)
	}
	calls := []call{
		{"getattr", func(fs namespace) (string, error) { return attr(fs.GetAttr(ino)) }},
		{"lookup", func(fs namespace) (string, error) { return attr(fs.Lookup(c, ino, name)) }},
		{"mkdir", func(fs namespace) (string, error) { return attr(fs.Mkdir(c, ino, name, 0o755, now)) }},
		{"mknod", func(fs namespace) (string, error) { return attr(fs.Mknod(c, ino, name, 0o644, 0, now)) }},
		{"symlink", func(fs namespace) (string, error) { return attr(fs.Symlink(c, ino, name, "a/b", now)) }},
		{"link", func(fs namespace) (string, error) { return attr(fs.Link(c, ino2, ino, name, now)) }},
		{"unlink", func(fs namespace) (string, error) { return "", fs.Unlink(c, ino, name, now) }},
		{"rmdir", func(fs namespace) (string, error) { return "", fs.Rmdir(c, ino, name, now) }},
		{"readlink", func(fs namespace) (string, error) { return fs.Readlink(ino) }},
		{"setattr", func(fs namespace) (string, error) { return attr(fs.SetAttr(c, ino, SetAttr{}, now)) }},
		{"listxattr", func(fs namespace) (string, error) { l, err := fs.ListXattr(c, ino); return fmt.Sprint(l), err }},
		{"getxattr", func(fs namespace) (string, error) { v, err := fs.GetXattr(c, ino, "user.a"); return string(v), err }},
		{"summary", func(fs namespace) (string, error) { s, err := fs.Summary(c, ino); return fmt.Sprint(s), err }},
		{"readdir", func(fs namespace) (string, error) {
			ents, next, eof, err := fs.Readdir(c, ino, "", 0, false)
			return fmt.Sprint(fmtDirents(ents), next, eof), err
		}},
	}
	k := calls[d.pick(len(calls))]
	if d.chance(15) {
		// Rename between two live directories, with odd names.
		p1, p2 := d.inoPick(true), d.inoPick(true)
		flags := []uint32{0, RenameNoReplace, RenameExchange}[d.pick(3)]
		k = call{fmt.Sprintf("rename %d/%q -> %d/%q flags=%d", p1, abbrev(name), p2, abbrev(name2), flags), func(fs namespace) (string, error) {
			return "", fs.Rename(c, p1, name, p2, name2, flags, now)
		}}
	}
	op := fmt.Sprintf("%s ino=%d ino2=%d name=%q as %s (inode-level)", k.op, ino, ino2, abbrev(name), credName(c))
	eOut, eErr := k.f(d.e)
	mOut, mErr := k.f(d.m)
	if err := d.same(op, eErr, mErr, nil, nil); err != nil {
		return err
	}
	if eErr == nil && eOut != mOut {
		return fmt.Errorf("%s:\n  engine %s\n  model  %s", op, eOut, mOut)
	}
	return nil
}

// ---- whole-tree comparison ----

// compareTrees walks the model's tree and checks that the engine holds the
// same: every path's attributes, directory listings (paged with small
// limits), symlink targets, xattrs, the counts, and Summary of the root.
func (d *driver) compareTrees() error {
	if d.e.Len() != len(d.m.nodes) {
		return fmt.Errorf("tree: engine has %d nodes, model %d", d.e.Len(), len(d.m.nodes))
	}
	es, ms := d.e.Statfs(), d.m.Statfs()
	if es.UsedInodes != ms.UsedInodes || es.UsedBytes != ms.UsedBytes {
		return fmt.Errorf("tree: statfs engine %+v, model %+v", es, ms)
	}
	esum, err := d.e.Summary(credRoot, d.e.Root())
	msum, _ := d.m.Summary(credRoot, d.m.root)
	if err != nil || esum != msum {
		return fmt.Errorf("tree: summary of / engine %+v (%v), model %+v", esum, err, msum)
	}
	limit := 1 + d.step%3
	var visit func(path string, n *mnode) error
	visit = func(path string, n *mnode) error {
		want := d.m.attr(n)
		got, err := d.e.Resolve(credRoot, path, false)
		if err != nil || got != want {
			return fmt.Errorf("tree: %s: engine %s (%s), model %s", path, fmtAttr(got), errName(err), fmtAttr(want))
		}
		if got2, err := d.e.GetAttr(want.Ino); err != nil || got2 != want {
			return fmt.Errorf("tree: getattr %d (%s): engine %s (%s)", want.Ino, path, fmtAttr(got2), errName(err))
		}
		if err := d.compareXattrs(path, n); err != nil {
			return err
		}
		switch n.typ {
		case S_IFLNK:
			if t, err := d.e.Readlink(n.ino); err != nil || t != n.target {
				return fmt.Errorf("tree: readlink %s: engine %q (%s), model %q", path, t, errName(err), n.target)
			}
		case S_IFDIR:
			if p := d.m.derivedParent(n); p != n.parent {
				return fmt.Errorf("model bug: %s: recorded parent %d, entries say %d", path, n.parent, p)
			}
			if dd, err := d.e.Lookup(credRoot, n.ino, ".."); err != nil || dd.Ino != n.parent {
				return fmt.Errorf("tree: %s/..: engine %s (%s), model %d", path, fmtAttr(dd), errName(err), n.parent)
			}
			ents, err := pathReaddirAll(d.e, credRoot, n.ino, limit)
			if err != nil {
				return fmt.Errorf("tree: readdir %s: %v", path, err)
			}
			mEnts, _ := pathReaddirAll(d.m, credRoot, n.ino, 0)
			if !sameDirents(ents, mEnts) {
				return fmt.Errorf("tree: readdir %s (limit %d):\n  engine %s\n  model  %s", path, limit, fmtDirents(ents), fmtDirents(mEnts))
			}
			for _, ent := range mEnts {
				p := path + "/" + ent.Name
				if path == "/" {
					p = "/" + ent.Name
				}
				if err := visit(p, d.m.nodes[ent.Ino]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return visit("/", d.m.nodes[d.m.root])
}

func (d *driver) compareXattrs(path string, n *mnode) error {
	for _, c := range []Cred{credRoot, credU1} {
		got, err := d.e.ListXattr(c, n.ino)
		want, _ := d.m.ListXattr(c, n.ino)
		if err != nil || strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			return fmt.Errorf("tree: listxattr %s as %s: engine %q (%s), model %q", path, credName(c), got, errName(err), want)
		}
	}
	for name, want := range n.xattrs {
		got, err := d.e.GetXattr(credRoot, n.ino, name)
		if err != nil || !bytes.Equal(got, want) {
			return fmt.Errorf("tree: getxattr %s %q: engine %q (%s), model %q", path, name, got, errName(err), want)
		}
	}
	return nil
}

func sameDirents(a, b []Dirent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func fmtDirents(ents []Dirent) string {
	parts := make([]string, len(ents))
	for i, e := range ents {
		parts[i] = fmt.Sprintf("%s:%d:%s", shorten(e.Name), e.Ino, typeName(e.Type))
		if e.Attr != (Attr{}) {
			parts[i] += fmtAttr(e.Attr)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// abbrev abbreviates a path for messages: a long component becomes <c*N>, a
// long run of slashes </*N>.
func abbrev(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); {
		j := i
		for j < len(path) && path[j] == path[i] {
			j++
		}
		if j-i > 16 {
			fmt.Fprintf(&b, "<%c*%d>", path[i], j-i)
		} else {
			b.WriteString(path[i:j])
		}
		i = j
	}
	return b.String()
}

// shorten abbreviates a name or value for messages, as abbrev does.
func shorten(s string) string { return abbrev(s) }
