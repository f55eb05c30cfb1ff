package engine

import "syscall"

// SetAttr changes the attributes of ino that s.Valid names, with the
// permission rules of Linux's setattr_prepare: only the owner or root may
// change the mode or set explicit times (EPERM); only root may give a node
// away, and the owner may change its group only to one of their own groups
// (EPERM); setting a size or the times to now needs write permission
// (EACCES), except a size set through a descriptor open for writing
// (SetOpenFile: its open checked). All checks run before anything changes.
func (e *Engine) SetAttr(c Cred, ino Ino, s SetAttr, now int64) (Attr, error) {
	n, err := e.get(ino)
	if err != nil {
		return Attr{}, err
	}
	if e.pinned(ino) {
		return Attr{}, syscall.EBUSY // moving to another partition
	}
	if err := e.roCheck(ino); err != nil {
		return Attr{}, err
	}
	if err := e.checkSetAttr(c, n, s); err != nil {
		return Attr{}, err
	}
	if s.Valid == 0 {
		return e.attr(n), nil
	}
	var q Ino
	if s.Valid&SetSize != 0 {
		if q, err = e.quotaGrowDir(n, s.Size); err != nil {
			return Attr{}, err
		}
	}
	od, err := e.ownerSetAttr(n, s)
	if err != nil {
		return Attr{}, err
	}
	defer od.apply()
	a := n
	oldGID := e.gid(a)
	if s.Valid&(SetUID|SetGID) != 0 {
		uid, gid := e.uid(a), oldGID
		if s.Valid&SetUID != 0 {
			uid = s.UID
		}
		if s.Valid&SetGID != 0 {
			gid = s.GID
		}
		e.setOwner(a, uid, gid)
		if !n.isDir() {
			e.killSetID(c, a, oldGID)
		}
	}
	if s.Valid&SetMode != 0 {
		mode := s.Mode & 0o7777 // the type bits of s.Mode are ignored
		if !c.IsRoot() && !c.InGroup(e.gid(a)) {
			mode &^= S_ISGID
		}
		a.Mode = a.Mode&S_IFMT | mode
		e.chmodACL(a)
	}
	if s.Valid&SetSize != 0 {
		if s.Size < a.Size {
			e.truncateData(n, s.Size, now)
		}
		e.used += s.Size - a.Size
		old := a.Size
		a.Size = s.Size
		e.quotaResizedDir(q, a, old)
		a.Mtime = now
		if !c.IsRoot() {
			e.killSetID(c, a, e.gid(a))
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
	return e.attr(a), nil
}

// checkSetAttr is SetAttr's permission and type check.
func (e *Engine) checkSetAttr(c Cred, n *node, s SetAttr) error {
	owner := e.isOwner(c, n)
	if s.Valid&SetMode != 0 {
		if n.Mode&S_IFMT == S_IFLNK {
			return syscall.EOPNOTSUPP // symlinks have no mode of their own
		}
		if !owner {
			return syscall.EPERM
		}
	}
	// chown_ok and chgrp_ok: only root gives a node away; the owner may
	// "change" the owner to itself, and the group to one of its groups or
	// to the group it already has.
	if s.Valid&SetUID != 0 && !c.IsRoot() && (c.UID != e.uid(n) || s.UID != e.uid(n)) {
		return syscall.EPERM
	}
	if s.Valid&SetGID != 0 && !c.IsRoot() &&
		(c.UID != e.uid(n) || !c.InGroup(s.GID) && s.GID != e.gid(n)) {
		return syscall.EPERM
	}
	if s.Valid&SetSize != 0 {
		switch n.Mode & S_IFMT {
		case S_IFREG:
		case S_IFDIR:
			return syscall.EISDIR
		default:
			return syscall.EINVAL
		}
		if s.Valid&SetOpenFile == 0 {
			if err := e.access(c, n, mayWrite); err != nil {
				return err
			}
		}
		if s.Size > MaxFileSize {
			return syscall.EFBIG
		}
	}
	// Setting both times to now needs only write permission (utimes with
	// no times); any other change of times needs ownership.
	times := s.Valid & (SetAtime | SetMtime | SetAtimeNow | SetMtimeNow)
	if times != 0 && !owner {
		if times&^(SetAtime|SetMtime) != SetAtimeNow|SetMtimeNow {
			return syscall.EPERM
		}
		if err := e.access(c, n, mayWrite); err != nil {
			return err
		}
	}
	return nil
}

// killSetID clears set-user-id and, as Linux 6.2 and later do on chown
// and truncate, set-group-id when it means "run with the group" (group
// execute set) or when c is neither root nor in the file's group gid.
func (e *Engine) killSetID(c Cred, a *node, gid uint32) {
	a.Mode &^= S_ISUID
	if a.Mode&0o010 != 0 || !c.IsRoot() && !c.InGroup(gid) {
		a.Mode &^= S_ISGID
	}
}
