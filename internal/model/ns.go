package model

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// ErrSyntax is returned for an op or op list that does not parse.
var ErrSyntax = errors.New("model: syntax")

// Namespace is the inode-level method set the engine offers. The Oracle
// implements it, and so does an adapter over anything with the engine's
// calls; Apply composes the path-level operations from it.
type Namespace interface {
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

var _ Namespace = (*Oracle)(nil)

// Result is what an operation returned. Err is 0 on success; the other
// fields are set only on success, and only those the operation returns.
type Result struct {
	Err  syscall.Errno
	Attr *Attr    // the node made, changed or found
	Ents []Dirent // readdir's page
	Next string   // readdir's cursor
	EOF  bool     // readdir's end
	Text string   // readlink's target, getxattr's value, listxattr's names, summary, statfs
}

func (r Result) String() string {
	if r.Err != 0 {
		return ErrnoName(r.Err)
	}
	s := "ok"
	if r.Attr != nil {
		s += " " + FormatAttr(*r.Attr)
	}
	if r.Ents != nil || r.Next != "" || r.EOF {
		s += fmt.Sprintf(" next=%s eof=%v %s", quote(r.Next), r.EOF, FormatDirents(r.Ents))
	}
	if r.Text != "" {
		s += " " + quote(r.Text)
	}
	return s
}

// Apply runs op on ns at time now, composing the path-level operations as
// a server does. An error that is not a bare syscall.Errno (the engine
// promises bare ones) is returned as the error, not as the result.
func Apply(ns Namespace, op Op, now int64) (Result, error) {
	var r Result
	var err error
	attr := func(a Attr, e error) {
		err = e
		if e == nil {
			r.Attr = &a
		}
	}
	parent := func(path string, f func(p Ino, name string) error) {
		var p Ino
		var name string
		if p, name, err = ns.ResolveParent(op.Cred, path); err == nil {
			err = f(p, name)
		}
	}
	// asRoot resolves op.Path as root and, if that worked, calls f.
	asRoot := func(f func(ino Ino)) {
		var a Attr
		if a, err = ns.Resolve(CredRoot, op.Path, true); err == nil {
			f(a.Ino)
		}
	}
	node := func(follow bool, f func(ino Ino)) {
		var a Attr
		if a, err = ns.Resolve(op.Cred, op.Path, follow); err == nil {
			f(a.Ino)
		}
	}
	c := op.Cred
	switch op.Kind {
	case KMkdir:
		parent(op.Path, func(p Ino, name string) error { attr(ns.Mkdir(c, p, name, op.Mode, now)); return err })
	case KMknod:
		parent(op.Path, func(p Ino, name string) error { attr(ns.Mknod(c, p, name, op.Mode, op.Rdev, now)); return err })
	case KSymlink:
		parent(op.Path, func(p Ino, name string) error { attr(ns.Symlink(c, p, name, op.Target, now)); return err })
	case KLink:
		node(false, func(ino Ino) {
			parent(op.Path2, func(p Ino, name string) error { attr(ns.Link(c, ino, p, name, now)); return err })
		})
	case KUnlink:
		parent(op.Path, func(p Ino, name string) error { return ns.Unlink(c, p, name, now) })
	case KRmdir:
		// The root path has no entry to remove (EBUSY, as the server says),
		// once the path itself is accepted: rmdir(2) copies the path in
		// first, so an over-long one is ENAMETOOLONG.
		parent(op.Path, func(p Ino, name string) error {
			if strings.Trim(op.Path, "/") == "" {
				return syscall.EBUSY
			}
			return ns.Rmdir(c, p, name, now)
		})
	case KRename:
		parent(op.Path, func(p Ino, name string) error {
			parent(op.Path2, func(p2 Ino, name2 string) error { return ns.Rename(c, p, name, p2, name2, op.Flags, now) })
			return err
		})
	case KSetAttr:
		node(op.Follow, func(ino Ino) { attr(ns.SetAttr(c, ino, op.Set, now)) })
	case KSetXattr:
		node(op.Follow, func(ino Ino) { err = ns.SetXattr(c, ino, op.Name, op.Value, op.Flags, now) })
	case KGetXattr:
		node(op.Follow, func(ino Ino) {
			var v []byte
			v, err = ns.GetXattr(c, ino, op.Name)
			r.Text = string(v)
		})
	case KListXattr:
		node(op.Follow, func(ino Ino) {
			var l []string
			l, err = ns.ListXattr(c, ino)
			r.Text = formatNames(l)
		})
	case KRemoveXattr:
		node(op.Follow, func(ino Ino) { err = ns.RemoveXattr(c, ino, op.Name, now) })
	case KLookup:
		asRoot(func(ino Ino) { attr(ns.Lookup(c, ino, op.Name)) })
	case KResolve:
		attr(ns.Resolve(c, op.Path, op.Follow))
	case KReaddir:
		asRoot(func(ino Ino) { r.Ents, r.Next, r.EOF, err = ns.Readdir(c, ino, op.Cursor, op.Limit, op.Attrs) })
	case KSummary:
		asRoot(func(ino Ino) {
			var s Summary
			s, err = ns.Summary(c, ino)
			r.Text = formatSummary(s)
		})
	case KStatfs:
		s := ns.Statfs()
		r.Text = fmt.Sprintf("used=%d inodes=%d bsize=%d namemax=%d", s.UsedBytes, s.UsedInodes, s.BlockSize, s.MaxName)
	case KReadlink:
		node(false, func(ino Ino) { r.Text, err = ns.Readlink(ino) })
	case KGetAttrIno:
		attr(ns.GetAttr(op.Ino))
	case KLookupIno:
		if _, gone := ns.GetAttr(op.Ino); gone == syscall.ENOENT {
			err = syscall.ESTALE // a stale handle, as open_by_handle_at(2) answers
		} else {
			attr(ns.Lookup(c, op.Ino, op.Name))
		}
	case KMkdirIno:
		attr(ns.Mkdir(c, op.Ino, op.Name, op.Mode, now))
	case KMknodIno:
		attr(ns.Mknod(c, op.Ino, op.Name, op.Mode, op.Rdev, now))
	case KSymlinkIno:
		attr(ns.Symlink(c, op.Ino, op.Name, op.Target, now))
	case KLinkIno:
		attr(ns.Link(c, op.Ino2, op.Ino, op.Name, now))
	case KUnlinkIno:
		err = ns.Unlink(c, op.Ino, op.Name, now)
	case KRmdirIno:
		err = ns.Rmdir(c, op.Ino, op.Name, now)
	case KRenameIno:
		err = ns.Rename(c, op.Ino, op.Name, op.Ino2, op.Name2, op.Flags, now)
	case KReadlinkIno:
		r.Text, err = ns.Readlink(op.Ino)
	case KSetAttrIno:
		attr(ns.SetAttr(c, op.Ino, op.Set, now))
	case KListXattrIno:
		var l []string
		l, err = ns.ListXattr(c, op.Ino)
		r.Text = formatNames(l)
	case KGetXattrIno:
		var v []byte
		v, err = ns.GetXattr(c, op.Ino, op.Name)
		r.Text = string(v)
	case KSummaryIno:
		var s Summary
		s, err = ns.Summary(c, op.Ino)
		r.Text = formatSummary(s)
	case KReaddirIno:
		r.Ents, r.Next, r.EOF, err = ns.Readdir(c, op.Ino, op.Cursor, op.Limit, op.Attrs)
	case KRemoveXattrIno:
		err = ns.RemoveXattr(c, op.Ino, op.Name, now)
	case KQuotaSet, KQuotaGet, KQuotaRm:
		asRoot(func(ino Ino) { r.Text, err = applyQuota(ns, op, ino) })
	case KTrashLs, KTrashRestore, KTrashPurge:
		r.Text, err = applyTrash(ns, op, now)
	case KClone:
		node(op.Follow, func(ino Ino) {
			parent(op.Path2, func(p Ino, name string) error { attr(applyClone(ns, c, ino, p, name, now)); return err })
		})
	case KCloneIno:
		attr(applyClone(ns, c, op.Ino, op.Ino2, op.Name, now))
	case KSnapCreate, KSnapRm, KSnapLs, KSnapDiff:
		asRoot(func(ino Ino) { r.Attr, r.Text, err = applySnapshot(ns, op, ino, now) })
	default:
		return Result{}, fmt.Errorf("%w: unknown operation %q", ErrSyntax, op.Kind)
	}
	return finish(r, err)
}

// finish turns err into r.Err, dropping the outputs of a failed call.
func finish(r Result, err error) (Result, error) {
	if err == nil {
		return r, nil
	}
	en, ok := err.(syscall.Errno)
	if !ok {
		return Result{}, fmt.Errorf("not a bare errno: %w", err)
	}
	return Result{Err: en}, nil
}

// Apply runs op on the oracle; see the package function Apply.
func (m *Oracle) Apply(op Op, now int64) Result {
	r, err := Apply(m, op, now)
	if err != nil {
		// The oracle returns only bare errnos and knows every kind.
		panic(fmt.Sprintf("model: %v: %v", op, err))
	}
	return r
}

// formatNames writes a list of xattr names as Go-quoted strings in brackets.
func formatNames(names []string) string {
	b := []byte{'['}
	for i, n := range names {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendQuote(b, n)
	}
	return string(append(b, ']'))
}

func formatSummary(s Summary) string {
	b := []byte("dirs=")
	b = strconv.AppendUint(b, s.Dirs, 10)
	b = append(b, " files="...)
	b = strconv.AppendUint(b, s.Files, 10)
	b = append(b, " bytes="...)
	b = strconv.AppendUint(b, s.Bytes, 10)
	return string(b)
}
