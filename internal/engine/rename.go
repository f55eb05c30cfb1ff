package engine

import "syscall"

// Rename moves the entry name of parent to newName in newParent, with
// renameat2 semantics: an existing target is replaced (a non-directory by a
// non-directory, an empty directory by a directory) unless flags has
// RenameNoReplace (EEXIST); RenameExchange swaps two existing entries. A
// directory cannot move into its own subtree (EINVAL). Renaming an entry
// onto another link of the same node succeeds and changes nothing.
//
// The checks follow Linux's do_renameat2 and vfs_rename in order, so that
// where several errors apply the same one is returned.
func (e *Engine) Rename(c Cred, parent Ino, name string, newParent Ino, newName string, flags uint32, now int64) error {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return syscall.EINVAL
	}
	exchange := flags&RenameExchange != 0
	od, err := e.dir(parent)
	if err != nil {
		return err
	}
	if err := e.access(c, od, mayExec); err != nil {
		return err
	}
	nd, err := e.dir(newParent)
	if err != nil {
		return err
	}
	if err := e.access(c, nd, mayExec); err != nil {
		return err
	}
	if isDot(name) {
		return syscall.EBUSY
	}
	if isDot(newName) {
		if flags&RenameNoReplace != 0 {
			return syscall.EEXIST
		}
		return syscall.EBUSY
	}
	if err := checkSyntax(name); err != nil {
		return err
	}
	if err := checkSyntax(newName); err != nil {
		return err
	}
	if err := checkLen(name); err != nil {
		return err
	}
	oslot, src := e.child(od, name)
	if src == nil {
		return syscall.ENOENT
	}
	if err := checkLen(newName); err != nil {
		return err
	}
	nslot, dst := e.child(nd, newName)
	exists := dst != nil
	switch {
	case flags&RenameNoReplace != 0 && exists:
		return syscall.EEXIST
	case exchange && !exists:
		return syscall.ENOENT
	}
	if src.isDir() && e.isAncestor(src, nd) {
		return syscall.EINVAL
	}
	if exists && dst.isDir() && e.isAncestor(dst, od) {
		if exchange {
			return syscall.EINVAL
		}
		return syscall.ENOTEMPTY
	}
	if err := e.renameSnapCheck(od, src, nd, newName, dst); err != nil {
		return err
	}
	if src == dst {
		return nil
	}
	if e.reserved(od.Ino, name) || e.reserved(nd.Ino, newName) || e.pinned(nd.Ino) || e.pinned(od.Ino) {
		return syscall.EBUSY // a rename across partitions is about to change the entry
	}
	if err := e.checkRenamePerms(c, od, src, nd, dst, exchange); err != nil {
		return err
	}
	if !exchange && exists && dst.isDir() && e.st.extraOf(dst).dir.live > 0 {
		return syscall.ENOTEMPTY
	}
	var qa, qb quotaMove
	if e.quota.dirs != nil {
		if qa, qb, err = e.quotaRename(od, src, nd, dst, exchange); err != nil {
			return err
		}
		defer qa.apply(e)
		defer qb.apply(e)
	}
	if exchange {
		e.exchange(od, name, oslot, src, nd, newName, nslot, dst, now)
		return nil
	}
	if exists && e.trash.days > 0 && !dst.isDir() && e.toTrash(nd, newName, dst, now) {
		exists = false // the target went to the trash
	}
	if exists {
		if dst.isDir() {
			nd.Nlink--
		}
		e.dropLink(dst, now)
	}
	if exists {
		// The entry stays where it is and names the source now.
		e.entriesMut(nd).replace(newName, oslot)
		nd.Mtime, nd.Ctime = now, now
		e.removeEntry(od, name, now)
	} else {
		e.removeEntry(od, name, now)
		e.addEntry(nd, newName, oslot, now)
	}
	if src.isDir() && od != nd {
		od.Nlink--
		nd.Nlink++
		e.st.extraMut(src).parent = nd.Ino
	}
	src.Ctime = now
	return nil
}

// checkRenamePerms runs vfs_rename's permission and type checks.
func (e *Engine) checkRenamePerms(c Cred, od, src, nd, dst *node, exchange bool) error {
	if err := e.mayDelete(c, od, src); err != nil {
		return err
	}
	if dst == nil {
		if err := e.access(c, nd, mayWrite|mayExec); err != nil {
			return err
		}
	} else {
		if err := e.mayDelete(c, nd, dst); err != nil {
			return err
		}
		if !exchange {
			if src.isDir() && !dst.isDir() {
				return syscall.ENOTDIR
			}
			if !src.isDir() && dst.isDir() {
				return syscall.EISDIR
			}
		}
	}
	if od != nd {
		// Moving a directory rewrites its "..": c needs write access to it.
		if src.isDir() {
			if err := e.access(c, src, mayWrite); err != nil {
				return err
			}
		}
		if exchange && dst.isDir() {
			if err := e.access(c, dst, mayWrite); err != nil {
				return err
			}
		}
	}
	return nil
}

// exchange swaps entries name of od (src) and newName of nd (dst).
func (e *Engine) exchange(od *node, name string, oslot uint32, src *node, nd *node, newName string, nslot uint32, dst *node, now int64) {
	e.entriesMut(od).replace(name, nslot)
	e.entriesMut(nd).replace(newName, oslot)
	od.Mtime, od.Ctime = now, now
	nd.Mtime, nd.Ctime = now, now
	if od != nd {
		if src.isDir() {
			e.st.extraMut(src).parent = nd.Ino
			od.Nlink--
			nd.Nlink++
		}
		if dst.isDir() {
			e.st.extraMut(dst).parent = od.Ino
			nd.Nlink--
			od.Nlink++
		}
	}
	src.Ctime, dst.Ctime = now, now
}

// isAncestor reports whether directory a is d or one of d's ancestors.
func (e *Engine) isAncestor(a, d *node) bool {
	for {
		if d == a {
			return true
		}
		if d.Ino == e.root {
			return false
		}
		d = e.node(e.parentOf(d))
	}
}
