package engine

import "syscall"

// MaxLinks is the most hard links a non-directory may have (EMLINK
// beyond). Directories have no limit on subdirectories, as on ext4 with
// dir_nlink and on tmpfs.
const MaxLinks = 65000

// prepareEntry checks that c may add an entry name to directory parent and
// returns the directory. The checks run in Linux's order: the directory
// exists and is one, the name can be carried at all, c may search the
// directory, "." and ".." exist (EEXIST), the lookup (ENAMETOOLONG, or
// EEXIST if the name is taken), c may write the directory.
func (e *Engine) prepareEntry(c Cred, parent Ino, name string) (*node, error) {
	d, err := e.dir(parent)
	if err != nil {
		return nil, err
	}
	if err := checkSyntax(name); err != nil {
		return nil, err
	}
	if err := e.access(c, d, mayExec); err != nil {
		return nil, err
	}
	if isDot(name) {
		return nil, syscall.EEXIST
	}
	if err := checkLen(name); err != nil {
		return nil, err
	}
	if e.entries(d).find(name) >= 0 {
		return nil, syscall.EEXIST
	}
	if err := e.entryCheck(d, name); err != nil {
		return nil, err // the snapshot area is read only
	}
	if err := e.access(c, d, mayWrite); err != nil {
		return nil, err
	}
	if e.reserved(d.Ino, name) || e.pinned(d.Ino) {
		return nil, syscall.EBUSY // a rename across partitions is about to fill it (or to replace d, empty)
	}
	return d, nil
}

// newNode creates a node of the given type and mode owned by c in directory
// d, applying set-group-id inheritance as Linux's inode_init_owner.
func (e *Engine) newNode(c Cred, d *node, mode uint32, now int64) (uint32, *node) {
	typ := mode & S_IFMT
	mode = typ | mode&0o7777
	gid := e.createGID(c, d)
	if d.Mode&S_ISGID != 0 && typ == S_IFDIR {
		mode |= S_ISGID
	}
	if typ != S_IFDIR && mode&(S_ISGID|0o010) == S_ISGID|0o010 && !c.IsRoot() && !c.InGroup(gid) {
		mode &^= S_ISGID
	}
	slot, n := e.st.add(e.alloc())
	n.Mode, n.Nlink = mode, 1
	e.setOwner(n, c.UID, gid)
	n.Atime, n.Mtime, n.Ctime = now, now, now
	return slot, n
}

// Mkdir creates directory name in parent with permission bits mode.
func (e *Engine) Mkdir(c Cred, parent Ino, name string, mode uint32, now int64) (Attr, error) {
	return e.MkdirMasked(c, parent, name, mode, 0, now)
}

// MkdirMasked is Mkdir with the creator's umask, which applies only when
// parent has no default ACL (the ACL masks the mode instead; acl.go).
func (e *Engine) MkdirMasked(c Cred, parent Ino, name string, mode, umask uint32, now int64) (Attr, error) {
	d, err := e.prepareEntry(c, parent, name)
	if err != nil {
		return Attr{}, err
	}
	if e.next >= 1<<localBits {
		return Attr{}, syscall.ENOSPC // the partition's inode numbers are used up
	}
	q, err := e.quotaCreateAs(c, d)
	if err != nil {
		return Attr{}, err
	}
	// mkdir keeps only the permission and sticky bits of mode; set-group-id
	// comes from the parent alone.
	slot, n := e.newNode(c, d, S_IFDIR|mode&(0o777|S_ISVTX), now)
	e.inheritACL(d, n, umask)
	e.quotaCreated(q, n)
	n.Nlink = 2
	n.Size = dirSize
	x := e.st.extra(n)
	x.parent = d.Ino
	x.dir = &dirents{}
	e.addEntry(d, name, slot, now)
	d.Nlink++
	return e.attr(n), nil
}

// Mknod creates a regular file, fifo, socket or device node name in parent.
// A mode without type bits makes a regular file. As Linux's may_mknod, a
// directory type is refused with EPERM and any other unknown type with
// EINVAL before anything else; devices need root (EPERM), checked after
// the new entry's own checks.
func (e *Engine) Mknod(c Cred, parent Ino, name string, mode, rdev uint32, now int64) (Attr, error) {
	return e.MknodMasked(c, parent, name, mode, rdev, 0, now)
}

// MknodMasked is Mknod with the creator's umask, which applies only when
// parent has no default ACL (the ACL masks the mode instead; acl.go).
func (e *Engine) MknodMasked(c Cred, parent Ino, name string, mode, rdev, umask uint32, now int64) (Attr, error) {
	typ := mode & S_IFMT
	switch typ {
	case 0:
		mode |= S_IFREG
	case S_IFREG, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK:
	case S_IFDIR:
		return Attr{}, syscall.EPERM
	default:
		return Attr{}, syscall.EINVAL
	}
	d, err := e.prepareEntry(c, parent, name)
	if err != nil {
		return Attr{}, err
	}
	if e.next >= 1<<localBits {
		return Attr{}, syscall.ENOSPC // the partition's inode numbers are used up
	}
	if (typ == S_IFCHR || typ == S_IFBLK) && !c.IsRoot() {
		return Attr{}, syscall.EPERM
	}
	q, err := e.quotaCreateAs(c, d)
	if err != nil {
		return Attr{}, err
	}
	slot, n := e.newNode(c, d, mode, now)
	e.inheritACL(d, n, umask)
	e.quotaCreated(q, n)
	if (typ == S_IFCHR || typ == S_IFBLK) && rdev != 0 {
		e.st.extra(n).rdev = rdev
	}
	e.addEntry(d, name, slot, now)
	return e.attr(n), nil
}

// Symlink creates symlink name in parent pointing at target.
func (e *Engine) Symlink(c Cred, parent Ino, name, target string, now int64) (Attr, error) {
	switch {
	case target == "":
		return Attr{}, syscall.ENOENT
	case len(target) >= MaxPathLen: // the limit counts the terminating NUL
		return Attr{}, syscall.ENAMETOOLONG
	}
	for i := 0; i < len(target); i++ {
		if target[i] == 0 {
			return Attr{}, syscall.EINVAL
		}
	}
	d, err := e.prepareEntry(c, parent, name)
	if err != nil {
		return Attr{}, err
	}
	if e.next >= 1<<localBits {
		return Attr{}, syscall.ENOSPC // the partition's inode numbers are used up
	}
	q, err := e.quotaCreateAs(c, d)
	if err != nil {
		return Attr{}, err
	}
	slot, n := e.newNode(c, d, S_IFLNK|0o777, now)
	e.quotaCreated(q, n)
	e.st.extra(n).target = target
	n.Size = uint64(len(target))
	e.addEntry(d, name, slot, now)
	return e.attr(n), nil
}

// Link adds entry newName in newParent for the existing node ino, which
// must not be a directory (EPERM, checked after the new entry's own checks
// as in Linux's vfs_link).
func (e *Engine) Link(c Cred, ino Ino, newParent Ino, newName string, now int64) (Attr, error) {
	n, err := e.get(ino)
	if err != nil {
		return Attr{}, err
	}
	d, err := e.prepareEntry(c, newParent, newName)
	if err != nil {
		return Attr{}, err
	}
	if n.isDir() {
		return Attr{}, syscall.EPERM
	}
	if err := e.roCheck(n.Ino); err != nil {
		return Attr{}, err
	}
	if e.pinned(n.Ino) {
		return Attr{}, syscall.EBUSY
	}
	if n.Nlink == 0 {
		return Attr{}, syscall.ENOENT // an open file whose last link is gone, as Linux's vfs_link
	}
	if n.Nlink >= MaxLinks {
		return Attr{}, syscall.EMLINK
	}
	if e.regionOf(d) != e.regionOfNode(n) {
		return Attr{}, syscall.EXDEV // the links would lie under different quotas
	}
	n.Nlink++
	n.Ctime = now
	e.addEntry(d, newName, e.st.slotOf(ino), now)
	return e.attr(n), nil
}
