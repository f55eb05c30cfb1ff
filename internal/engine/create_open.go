package engine

import "syscall"

// CreateOpen creates regular file name in parent as MknodMasked does and
// opens it for its creator with open(2) flags (the access mode and
// OpenTrunc; OpenCreated is implied), in one step: it returns the new
// file's attributes and the parent's after the create. Like every
// change it fails whole or succeeds whole: the flags are checked before
// anything changes, and the open of a file its caller has just created
// asks for no permission.
func (e *Engine) CreateOpen(c Cred, parent Ino, name string, mode, umask, flags uint32, now int64) (file, dir Attr, err error) {
	if flags&openAccMode == openAccMode {
		return Attr{}, Attr{}, syscall.EINVAL
	}
	if t := mode & S_IFMT; t != 0 && t != S_IFREG {
		return Attr{}, Attr{}, syscall.EINVAL
	}
	a, err := e.MknodMasked(c, parent, name, mode|S_IFREG, 0, umask, now)
	if err != nil {
		return Attr{}, Attr{}, err
	}
	// Open of a node made just now by c, who owns it: it checks no
	// permission, and the node is linked and in no move between
	// partitions, so it cannot fail.
	if a, err = e.Open(c, a.Ino, flags|OpenCreated); err != nil {
		panic("engine: open of a file just created failed: " + err.Error())
	}
	dir, err = e.GetAttr(parent)
	if err != nil {
		panic("engine: parent of a file just created is gone: " + err.Error())
	}
	return a, dir, nil
}
