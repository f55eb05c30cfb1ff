package model

// The oracle's operations that add, remove and move names.

import (
	"strings"
	"syscall"
)

// prepCreate is the part of mkdirat/mknodat/symlinkat/linkat that finds
// the new entry's slot: search the directory (EACCES), "." and ".." exist
// (EEXIST), the lookup (ENAMETOOLONG, EEXIST), then may_create's write
// permission (EACCES).
func (m *Oracle) prepCreate(c Cred, parent Ino, name string) (*node, error) {
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
	if len(name) > NameMax {
		return nil, syscall.ENAMETOOLONG
	}
	if _, ok := d.ents[name]; ok {
		return nil, syscall.EEXIST
	}
	if err := m.entryErr(d, name); err != nil {
		return nil, err
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
func (m *Oracle) create(c Cred, d *node, name string, typ, perm uint32, now int64) *node {
	gid := c.GID
	if d.perm&S_ISGID != 0 {
		gid = d.gid
		if typ == S_IFDIR {
			perm |= S_ISGID
		} else if perm&(S_ISGID|0o010) == S_ISGID|0o010 && c.UID != 0 && !inGroup(c, gid) {
			perm &^= S_ISGID
		}
	}
	n := &node{
		ino: MakeIno(m.part, m.next), typ: typ, perm: perm, uid: c.UID, gid: gid,
		atime: now, mtime: now, ctime: now, xattrs: map[string][]byte{},
	}
	m.next++
	if typ == S_IFDIR {
		n.ents = map[string]Ino{}
		n.parent = d.ino
	}
	inheritACL(d, n)
	m.nodes[n.ino] = n
	d.ents[name] = n.ino
	d.mtime, d.ctime = now, now
	return n
}

// Mkdir is mkdirat: only the permission bits and the sticky bit of mode
// are used (mkdir(2) NOTES; vfs_mkdir masks with S_IRWXUGO|S_ISVTX).
func (m *Oracle) Mkdir(c Cred, parent Ino, name string, mode uint32, now int64) (Attr, error) {
	d, err := m.prepCreate(c, parent, name)
	if err != nil {
		return Attr{}, err
	}
	// No limit on subdirectories (like ext4's dir_nlink and tmpfs): a
	// directory's link count grows past MaxLinks.
	perm := mode & 0o1777
	if err := m.quotaCreate(d); err != nil {
		return Attr{}, err
	}
	return m.attr(m.create(c, d, name, S_IFDIR, perm, now)), nil
}

// Mknod is mknodat: may_mknod checks the type before the path (a
// directory is EPERM, an unknown type EINVAL); devices need CAP_MKNOD,
// checked in vfs_mknod after may_create.
func (m *Oracle) Mknod(c Cred, parent Ino, name string, mode, rdev uint32, now int64) (Attr, error) {
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
	if err := m.quotaCreate(d); err != nil {
		return Attr{}, err
	}
	n := m.create(c, d, name, typ, mode&0o7777, now)
	if dev {
		n.rdev = rdev
	}
	return m.attr(n), nil
}

// Symlink is symlinkat: the target is copied in first (ENOENT if empty,
// ENAMETOOLONG if it does not fit in PATH_MAX with its NUL).
func (m *Oracle) Symlink(c Cred, parent Ino, name, target string, now int64) (Attr, error) {
	switch {
	case target == "":
		return Attr{}, syscall.ENOENT
	case len(target) >= PathMax:
		return Attr{}, syscall.ENAMETOOLONG
	case strings.IndexByte(target, 0) >= 0:
		return Attr{}, syscall.EINVAL
	}
	d, err := m.prepCreate(c, parent, name)
	if err != nil {
		return Attr{}, err
	}
	if err := m.quotaCreate(d); err != nil {
		return Attr{}, err
	}
	n := m.create(c, d, name, S_IFLNK, 0o777, now)
	n.target = target
	return m.attr(n), nil
}

// Link is linkat: the new entry's checks (filename_create, may_create)
// come before vfs_link refuses a directory (EPERM) or a full link count.
func (m *Oracle) Link(c Cred, ino Ino, newParent Ino, newName string, now int64) (Attr, error) {
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
	if err := m.roErr(n); err != nil {
		return Attr{}, err
	}
	if m.nlink(n) >= LinkMax {
		return Attr{}, syscall.EMLINK
	}
	if len(m.quotas) > 0 && m.nearestQuota(d) != m.quotaOverNode(ino) {
		return Attr{}, syscall.EXDEV
	}
	d.ents[newName] = ino
	d.mtime, d.ctime = now, now
	n.ctime = now
	return m.attr(n), nil
}

// ---- namespace: removal ----

// prepRemove is do_unlinkat/do_rmdir up to the lookup: search the
// directory, then dotName decides "." and "..", then the lookup.
func (m *Oracle) prepRemove(c Cred, parent Ino, name string, dotErr func(string) error) (*node, *node, error) {
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
	if err := m.removeErr(d, v); err != nil {
		return nil, nil, err
	}
	if err := mMayDelete(c, d, v); err != nil {
		return nil, nil, err
	}
	return d, v, nil
}

func (m *Oracle) Unlink(c Cred, parent Ino, name string, now int64) error {
	d, v, err := m.prepRemove(c, parent, name, func(string) error { return syscall.EISDIR })
	if err != nil {
		return err
	}
	if v.dir() {
		return syscall.EISDIR
	}
	if m.toTrash(d, name, v, now) {
		return nil
	}
	delete(d.ents, name)
	d.mtime, d.ctime = now, now
	v.ctime = now
	m.forget(v)
	return nil
}

func (m *Oracle) Rmdir(c Cred, parent Ino, name string, now int64) error {
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
	if len(v.ents) > 0 && m.bug != bugRmdirNonEmpty {
		return syscall.ENOTEMPTY
	}
	if m.toTrash(d, name, v, now) {
		return nil
	}
	delete(d.ents, name)
	d.mtime, d.ctime = now, now
	m.forget(v)
	return nil
}

// Rename is renameat2, following do_renameat2 and vfs_rename in order.
func (m *Oracle) Rename(c Cred, parent Ino, name string, newParent Ino, newName string, flags uint32, now int64) error {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return syscall.EINVAL
	}
	exchange := flags&RenameExchange != 0
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
		if flags&RenameNoReplace != 0 {
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
	if len(newName) > NameMax {
		return syscall.ENAMETOOLONG
	}
	var dst *node
	if ino, ok := nd.ents[newName]; ok {
		dst = m.nodes[ino]
	}
	if flags&RenameNoReplace != 0 && dst != nil {
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
	if err := m.roErr(od, src, nd); err != nil {
		return err
	}
	if dst != nil {
		err = m.removeErr(nd, dst)
	} else {
		err = m.entryErr(nd, newName)
	}
	if err != nil {
		return err
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
	if err := m.quotaTry(m.tryRename(od, name, src, nd, newName, dst, exchange)); err != nil {
		return err
	}
	if exchange {
		od.ents[name], nd.ents[newName] = dst.ino, src.ino
		dst.ctime = now
		if dst.dir() {
			dst.parent = od.ino
		}
	} else {
		if dst != nil && !dst.dir() && m.toTrash(nd, newName, dst, now) {
			dst = nil // the target went to the trash
		}
		delete(od.ents, name)
		nd.ents[newName] = src.ino
		if dst != nil {
			dst.ctime = now
			m.forget(dst)
		}
	}
	if m.bug != bugRenameCtime {
		src.ctime = now
	}
	if src.dir() {
		src.parent = nd.ino
	}
	od.mtime, od.ctime = now, now
	nd.mtime, nd.ctime = now, now
	return nil
}

// ---- namespace: attributes ----
