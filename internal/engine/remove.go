package engine

import "syscall"

// prepareRemove finds the entry name in directory parent for removal and
// checks that c may remove it.
func (e *Engine) prepareRemove(c Cred, parent Ino, name string) (d, victim *node, err error) {
	if d, err = e.dir(parent); err != nil {
		return nil, nil, err
	}
	if err = checkName(name); err != nil {
		return nil, nil, err
	}
	if err = access(c, d, mayExec); err != nil {
		return nil, nil, err
	}
	ino, ok := d.children[name]
	if !ok {
		return nil, nil, syscall.ENOENT
	}
	victim = e.nodes[ino]
	if err = mayDelete(c, d, victim); err != nil {
		return nil, nil, err
	}
	return d, victim, nil
}

// Unlink removes the entry name, which must not be a directory (EISDIR),
// from parent. The node goes when its last link does.
func (e *Engine) Unlink(c Cred, parent Ino, name string, now int64) error {
	if isDot(name) {
		if _, err := e.dir(parent); err != nil {
			return err
		}
		return syscall.EISDIR
	}
	d, victim, err := e.prepareRemove(c, parent, name)
	if err != nil {
		return err
	}
	if victim.isDir() {
		return syscall.EISDIR
	}
	d.removeEntry(name, now)
	e.dropLink(victim, now)
	return nil
}

// Rmdir removes the empty directory name from parent.
func (e *Engine) Rmdir(c Cred, parent Ino, name string, now int64) error {
	switch name {
	case ".":
		if _, err := e.dir(parent); err != nil {
			return err
		}
		return syscall.EINVAL
	case "..":
		if _, err := e.dir(parent); err != nil {
			return err
		}
		return syscall.ENOTEMPTY
	}
	d, victim, err := e.prepareRemove(c, parent, name)
	if err != nil {
		return err
	}
	if !victim.isDir() {
		return syscall.ENOTDIR
	}
	if len(victim.children) > 0 {
		return syscall.ENOTEMPTY
	}
	d.removeEntry(name, now)
	d.attr.Nlink--
	e.dropLink(victim, now)
	return nil
}
