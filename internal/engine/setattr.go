package engine

import "syscall"

// SetAttr changes the attributes of ino that s.Valid names, with the
// permission rules of Linux's setattr_prepare: only the owner or root may
// change the mode or set explicit times (EPERM); only root may give a node
// away, and the owner may change its group only to one of their own groups
// (EPERM); setting a size or the times to now needs write permission
// (EACCES). All checks run before anything changes.
func (e *Engine) SetAttr(c Cred, ino Ino, s SetAttr, now int64) (Attr, error) {
	n, err := e.get(ino)
	if err != nil {
		return Attr{}, err
	}
	if err := checkSetAttr(c, n, s); err != nil {
		return Attr{}, err
	}
	if s.Valid == 0 {
		return n.attr, nil
	}
	a := &n.attr
	if s.Valid&(SetUID|SetGID) != 0 {
		if s.Valid&SetUID != 0 {
			a.UID = s.UID
		}
		if s.Valid&SetGID != 0 {
			a.GID = s.GID
		}
		if !n.isDir() {
			killSetID(a)
		}
	}
	if s.Valid&SetMode != 0 {
		mode := s.Mode & 0o7777
		if !c.IsRoot() && !c.InGroup(a.GID) {
			mode &^= S_ISGID
		}
		a.Mode = a.Mode&S_IFMT | mode
	}
	if s.Valid&SetSize != 0 {
		e.used += s.Size - a.Size
		a.Size = s.Size
		a.Mtime = now
		if !c.IsRoot() {
			killSetID(a)
		}
	}
	switch {
	case s.Valid&SetAtimeNow != 0:
		a.Atime = now
	case s.Valid&SetAtime != 0:
		a.Atime = s.Atime
	}
	switch {
	case s.Valid&SetMtimeNow != 0:
		a.Mtime = now
	case s.Valid&SetMtime != 0:
		a.Mtime = s.Mtime
	}
	a.Ctime = now
	return *a, nil
}

// checkSetAttr is SetAttr's permission and type check.
func checkSetAttr(c Cred, n *node, s SetAttr) error {
	owner := isOwner(c, n)
	if s.Valid&SetMode != 0 && !owner {
		return syscall.EPERM
	}
	if s.Valid&SetUID != 0 && s.UID != n.attr.UID && !c.IsRoot() {
		return syscall.EPERM
	}
	if s.Valid&SetGID != 0 && s.GID != n.attr.GID && !c.IsRoot() {
		uidKept := s.Valid&SetUID == 0 || s.UID == n.attr.UID
		if !owner || !uidKept || !c.InGroup(s.GID) {
			return syscall.EPERM
		}
	}
	if s.Valid&SetSize != 0 {
		switch n.attr.Mode & S_IFMT {
		case S_IFREG:
		case S_IFDIR:
			return syscall.EISDIR
		default:
			return syscall.EINVAL
		}
		if err := access(c, n, mayWrite); err != nil {
			return err
		}
	}
	explicitTimes := s.Valid&SetAtime != 0 && s.Valid&SetAtimeNow == 0 ||
		s.Valid&SetMtime != 0 && s.Valid&SetMtimeNow == 0
	if explicitTimes && !owner {
		return syscall.EPERM
	}
	if s.Valid&(SetAtimeNow|SetMtimeNow) != 0 && !owner {
		if err := access(c, n, mayWrite); err != nil {
			return err
		}
	}
	return nil
}

// killSetID clears set-user-id, and set-group-id where it means "run with
// the group" (group execute set), as Linux does on chown and truncate.
func killSetID(a *Attr) {
	a.Mode &^= S_ISUID
	if a.Mode&0o010 != 0 {
		a.Mode &^= S_ISGID
	}
}
