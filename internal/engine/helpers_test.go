package engine

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/canopyfs/canopy/internal/model"
)

// namespace is the engine's method set. Both *Engine and the reference
// model in model_test.go implement it, so that the path-level helpers below
// drive either one the same way.
type namespace interface {
	Root() Ino
	Resolve(c Cred, path string, follow bool) (Attr, error)
	ResolveParent(c Cred, path string) (Ino, string, error)
	Lookup(c Cred, parent Ino, name string) (Attr, error)
	GetAttr(ino Ino) (Attr, error)
	Readlink(ino Ino) (string, error)
	Readdir(c Cred, ino Ino, cursor string, limit int, withAttrs bool) ([]Dirent, string, bool, error)
	Statfs() Statfs
	Summary(c Cred, ino Ino) (Summary, error)
	Mkdir(c Cred, parent Ino, name string, mode uint32, now int64) (Attr, error)
	Mknod(c Cred, parent Ino, name string, mode, rdev uint32, now int64) (Attr, error)
	Symlink(c Cred, parent Ino, name, target string, now int64) (Attr, error)
	Link(c Cred, ino Ino, newParent Ino, newName string, now int64) (Attr, error)
	Unlink(c Cred, parent Ino, name string, now int64) error
	Rmdir(c Cred, parent Ino, name string, now int64) error
	Rename(c Cred, parent Ino, name string, newParent Ino, newName string, flags uint32, now int64) error
	SetAttr(c Cred, ino Ino, s SetAttr, now int64) (Attr, error)
	GetXattr(c Cred, ino Ino, name string) ([]byte, error)
	SetXattr(c Cred, ino Ino, name string, value []byte, flags uint32, now int64) error
	ListXattr(c Cred, ino Ino) ([]string, error)
	RemoveXattr(c Cred, ino Ino, name string, now int64) error
}

var _ namespace = (*Engine)(nil)

// Callers used throughout the tests.
var (
	credRoot = Cred{}
	credU1   = Cred{UID: 1000, GID: 1000, Groups: []uint32{2000}}
	credU2   = Cred{UID: 1001, GID: 1001}
)

func credName(c Cred) string {
	switch {
	case c.UID == 0:
		return "root"
	case len(c.Groups) == 0:
		return fmt.Sprintf("%d:%d", c.UID, c.GID)
	}
	gs := make([]string, len(c.Groups))
	for i, g := range c.Groups {
		gs[i] = fmt.Sprint(g)
	}
	return fmt.Sprintf("%d:%d:%s", c.UID, c.GID, strings.Join(gs, ","))
}

var errnoNames = map[syscall.Errno]string{
	syscall.E2BIG:        "E2BIG",
	syscall.EACCES:       "EACCES",
	syscall.EBADF:        "EBADF",
	syscall.EBUSY:        "EBUSY",
	syscall.EEXIST:       "EEXIST",
	syscall.EFBIG:        "EFBIG",
	syscall.EINVAL:       "EINVAL",
	syscall.EIO:          "EIO",
	syscall.EISDIR:       "EISDIR",
	syscall.ELOOP:        "ELOOP",
	syscall.EMLINK:       "EMLINK",
	syscall.ENAMETOOLONG: "ENAMETOOLONG",
	syscall.ENODATA:      "ENODATA",
	syscall.ENOENT:       "ENOENT",
	syscall.ENOSPC:       "ENOSPC",
	syscall.ENOTDIR:      "ENOTDIR",
	syscall.ENOTEMPTY:    "ENOTEMPTY",
	syscall.EOPNOTSUPP:   "EOPNOTSUPP",
	syscall.EPERM:        "EPERM",
	syscall.ERANGE:       "ERANGE",
	syscall.EXDEV:        "EXDEV",
	syscall.EDQUOT:       "EDQUOT",
}

// errName names err: "ok" for nil, the errno's symbol for a bare
// syscall.Errno, and something that cannot match an errno otherwise (the
// engine promises bare Errno values, not wrapped ones).
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	if en, ok := err.(syscall.Errno); ok {
		if s, ok := errnoNames[en]; ok {
			return s
		}
		return fmt.Sprintf("errno(%d)", int(en))
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return fmt.Sprintf("wrapped %s: %v", errName(en), err)
	}
	return fmt.Sprintf("not an errno: %v", err)
}

// modeString formats a mode like ls -l, as the model does.
func modeString(mode uint32) string { return model.ModeString(mode) }

// typeName names a node type, as the model does.
func typeName(t uint32) string { return model.TypeName(t) }

// fmtAttr formats every field of a, for failure messages.
func fmtAttr(a Attr) string {
	return fmt.Sprintf("{ino=%d mode=%s(%o) uid=%d gid=%d nlink=%d size=%d atime=%d mtime=%d ctime=%d rdev=%d}",
		a.Ino, modeString(a.Mode), a.Mode, a.UID, a.GID, a.Nlink, a.Size, a.Atime, a.Mtime, a.Ctime, a.Rdev)
}

// The path-level operations below compose the engine's calls the way a
// server serving path-based requests would: resolve the parent directory,
// then call the inode-level operation. Each returns the first error.

func parentThen(fs namespace, c Cred, path string, f func(parent Ino, name string) error) error {
	parent, name, err := fs.ResolveParent(c, path)
	if err != nil {
		return err
	}
	return f(parent, name)
}

func pathMkdir(fs namespace, c Cred, path string, mode uint32, now int64) (a Attr, err error) {
	err = parentThen(fs, c, path, func(p Ino, name string) error {
		a, err = fs.Mkdir(c, p, name, mode, now)
		return err
	})
	return a, err
}

func pathMknod(fs namespace, c Cred, path string, mode, rdev uint32, now int64) (a Attr, err error) {
	err = parentThen(fs, c, path, func(p Ino, name string) error {
		a, err = fs.Mknod(c, p, name, mode, rdev, now)
		return err
	})
	return a, err
}

func pathSymlink(fs namespace, c Cred, target, path string, now int64) (a Attr, err error) {
	err = parentThen(fs, c, path, func(p Ino, name string) error {
		a, err = fs.Symlink(c, p, name, target, now)
		return err
	})
	return a, err
}

// pathLink is link(2): the old path is resolved without following a final
// symlink, then the new path's parent.
func pathLink(fs namespace, c Cred, oldPath, newPath string, now int64) (Attr, error) {
	old, err := fs.Resolve(c, oldPath, false)
	if err != nil {
		return Attr{}, err
	}
	var a Attr
	err = parentThen(fs, c, newPath, func(p Ino, name string) error {
		a, err = fs.Link(c, old.Ino, p, name, now)
		return err
	})
	return a, err
}

func pathUnlink(fs namespace, c Cred, path string, now int64) error {
	return parentThen(fs, c, path, func(p Ino, name string) error { return fs.Unlink(c, p, name, now) })
}

// pathRmdir composes ResolveParent and Rmdir as the server does, with its
// one rule for the root path, which has no entry to remove (EBUSY).
func pathRmdir(fs namespace, c Cred, path string, now int64) error {
	if path != "" && strings.Trim(path, "/") == "" {
		return syscall.EBUSY
	}
	return parentThen(fs, c, path, func(p Ino, name string) error { return fs.Rmdir(c, p, name, now) })
}

func pathRename(fs namespace, c Cred, oldPath, newPath string, flags uint32, now int64) error {
	op, on, err := fs.ResolveParent(c, oldPath)
	if err != nil {
		return err
	}
	np, nn, err := fs.ResolveParent(c, newPath)
	if err != nil {
		return err
	}
	return fs.Rename(c, op, on, np, nn, flags, now)
}

func pathSetAttr(fs namespace, c Cred, path string, follow bool, s SetAttr, now int64) (Attr, error) {
	a, err := fs.Resolve(c, path, follow)
	if err != nil {
		return Attr{}, err
	}
	return fs.SetAttr(c, a.Ino, s, now)
}

func pathReaddirAll(fs namespace, c Cred, ino Ino, limit int) ([]Dirent, error) {
	var all []Dirent
	cursor := ""
	for {
		ents, next, eof, err := fs.Readdir(c, ino, cursor, limit, true)
		if err != nil {
			return nil, err
		}
		all = append(all, ents...)
		if eof {
			return all, nil
		}
		if len(ents) == 0 {
			return all, fmt.Errorf("readdir returned an empty page without eof at cursor %q", cursor)
		}
		cursor = next
	}
}
