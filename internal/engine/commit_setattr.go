package engine

import "syscall"

// commitSetAttrValid are the changes CommitSetAttr takes: mode, owner
// and times, not the size.
const commitSetAttrValid = SetMode | SetUID | SetGID | SetAtime | SetMtime | SetAtimeNow | SetMtimeNow

// CommitSetAttr is Commit followed by SetAttr of s, as one change: both
// happen or neither. It is how a client closes a new file whose chmod,
// chown and utimes it held back until its data was committed (tar, cp -p:
// write, then fchown, fchmod and futimens, then close), in one call
// instead of four.
//
// With no writes and no size, it is SetAttr alone (a commit of nothing
// would stamp the file's mtime).
//
// s may change the mode, the owner and the times (EINVAL for anything
// else). Its permission is checked before the commit: the commit changes
// nothing that check reads (the owner, and the permission bits that
// decide write access), so SetAttr cannot then refuse what was checked.
// The exception is the owner quota check, which depends on the bytes the
// file holds after the commit: while user or group quotas are on, an s
// that sets the owner is refused with EOPNOTSUPP, changing nothing, and
// the caller sends the two calls apart.
func (e *Engine) CommitSetAttr(c Cred, ino Ino, writes []SliceWrite, size uint64, mtime int64, s SetAttr, now int64) (Attr, error) {
	if s.Valid&^commitSetAttrValid != 0 {
		return Attr{}, syscall.EINVAL
	}
	n, err := e.regular(ino)
	if err != nil {
		return Attr{}, err
	}
	if e.ownerQuotasOn() && s.Valid&(SetUID|SetGID) != 0 {
		return Attr{}, syscall.EOPNOTSUPP
	}
	if err := e.checkSetAttr(c, n, s); err != nil {
		return Attr{}, err
	}
	if len(writes) > 0 || size > 0 { // a commit of nothing would only stamp the mtime
		if _, err := e.Commit(c, ino, writes, size, mtime, now); err != nil {
			return Attr{}, err
		}
	}
	return e.SetAttr(c, ino, s, now)
}
