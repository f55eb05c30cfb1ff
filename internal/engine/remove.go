package engine

import "syscall"

// prepareRemove finds the entry name in directory parent for removal and
// checks that c may remove it, in the order of Linux's do_unlinkat and
// do_rmdir: the directory, the name's syntax, search permission, "." and
// ".." (whose error dotErr gives), the lookup (ENAMETOOLONG, ENOENT), then
// may_delete.
func (e *Engine) prepareRemove(c Cred, parent Ino, name string, dotErr func(string) error) (d, victim *node, err error) {
	if d, err = e.dir(parent); err != nil {
		return nil, nil, err
	}
	if err = checkSyntax(name); err != nil {
		return nil, nil, err
	}
	if err = e.access(c, d, mayExec); err != nil {
		return nil, nil, err
	}
	if isDot(name) {
		return nil, nil, dotErr(name)
	}
	if err = checkLen(name); err != nil {
		return nil, nil, err
	}
	if _, victim = e.child(d, name); victim == nil {
		return nil, nil, syscall.ENOENT
	}
	if err = e.removeCheck(d, victim); err != nil {
		return nil, nil, err // the snapshot area is read only; snapshots keep their directory
	}
	if err = e.mayDelete(c, d, victim); err != nil {
		return nil, nil, err
	}
	if e.reserved(d.Ino, name) || e.pinned(d.Ino) {
		return nil, nil, syscall.EBUSY // a rename across partitions is about to replace it (or to move d)
	}
	return d, victim, nil
}

// Unlink removes the entry name, which must not be a directory (EISDIR),
// from parent. The node goes when its last link does.
func (e *Engine) Unlink(c Cred, parent Ino, name string, now int64) error {
	d, victim, err := e.prepareRemove(c, parent, name, func(string) error { return syscall.EISDIR })
	if err != nil {
		return err
	}
	if victim.isDir() {
		return syscall.EISDIR
	}
	if e.trash.days > 0 && e.toTrash(d, name, victim, now) {
		return nil
	}
	e.removeEntry(d, name, now)
	e.dropLink(victim, now)
	return nil
}

// Rmdir removes the empty directory name from parent. Removing "." is
// EINVAL and ".." ENOTEMPTY, as on Linux.
func (e *Engine) Rmdir(c Cred, parent Ino, name string, now int64) error {
	d, victim, err := e.prepareRemove(c, parent, name, func(name string) error {
		if name == "." {
			return syscall.EINVAL
		}
		return syscall.ENOTEMPTY
	})
	if err != nil {
		return err
	}
	if !victim.isDir() {
		return syscall.ENOTDIR
	}
	if e.st.extraOf(victim).dir.live > 0 {
		return syscall.ENOTEMPTY
	}
	if e.trash.days > 0 && e.toTrash(d, name, victim, now) {
		return nil
	}
	e.removeEntry(d, name, now)
	d.Nlink--
	e.dropLink(victim, now)
	return nil
}
