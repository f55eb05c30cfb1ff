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
	if err := access(c, od, mayExec); err != nil {
		return err
	}
	nd, err := e.dir(newParent)
	if err != nil {
		return err
	}
	if err := access(c, nd, mayExec); err != nil {
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
	oino, ok := od.children[name]
	if !ok {
		return syscall.ENOENT
	}
	src := e.nodes[oino]
	if err := checkLen(newName); err != nil {
		return err
	}
	nino, exists := nd.children[newName]
	var dst *node
	if exists {
		dst = e.nodes[nino]
	}
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
	if src == dst {
		return nil
	}
	if err := e.checkRenamePerms(c, od, src, nd, dst, exchange); err != nil {
		return err
	}
	if exchange {
		e.exchange(od, name, src, nd, newName, dst, now)
		return nil
	}
	if exists {
		if dst.isDir() && len(dst.children) > 0 {
			return syscall.ENOTEMPTY
		}
		if dst.isDir() {
			nd.attr.Nlink--
		}
		e.dropLink(dst, now)
	}
	od.removeEntry(name, now)
	nd.addEntry(newName, oino, now)
	if src.isDir() && od != nd {
		od.attr.Nlink--
		nd.attr.Nlink++
		src.parent = nd.attr.Ino
	}
	src.attr.Ctime = now
	return nil
}

// checkRenamePerms runs vfs_rename's permission and type checks.
func (e *Engine) checkRenamePerms(c Cred, od, src, nd, dst *node, exchange bool) error {
	if err := mayDelete(c, od, src); err != nil {
		return err
	}
	if dst == nil {
		if err := access(c, nd, mayWrite|mayExec); err != nil {
			return err
		}
	} else {
		if err := mayDelete(c, nd, dst); err != nil {
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
			if err := access(c, src, mayWrite); err != nil {
				return err
			}
		}
		if exchange && dst.isDir() {
			if err := access(c, dst, mayWrite); err != nil {
				return err
			}
		}
	}
	return nil
}

// exchange swaps entries name of od (src) and newName of nd (dst).
func (e *Engine) exchange(od *node, name string, src *node, nd *node, newName string, dst *node, now int64) {
	od.children[name] = dst.attr.Ino
	nd.children[newName] = src.attr.Ino
	od.attr.Mtime, od.attr.Ctime = now, now
	nd.attr.Mtime, nd.attr.Ctime = now, now
	if od != nd {
		if src.isDir() {
			src.parent = nd.attr.Ino
			od.attr.Nlink--
			nd.attr.Nlink++
		}
		if dst.isDir() {
			dst.parent = od.attr.Ino
			nd.attr.Nlink--
			od.attr.Nlink++
		}
	}
	src.attr.Ctime, dst.attr.Ctime = now, now
}

// isAncestor reports whether directory a is d or one of d's ancestors.
func (e *Engine) isAncestor(a, d *node) bool {
	for {
		if d == a {
			return true
		}
		if d.attr.Ino == e.root {
			return false
		}
		d = e.nodes[d.parent]
	}
}
