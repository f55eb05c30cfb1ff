package engine

import (
	"bytes"
	"strings"
	"syscall"
)

// checkSyntax rejects a name that no Linux call could carry, before
// anything else is checked: the empty name (ENOENT, as the empty path), and
// names with '/' or NUL (EINVAL; ENAMETOOLONG if also too long). "." and
// ".." pass; each operation decides what they mean for it.
func checkSyntax(name string) error {
	switch {
	case name == "":
		return syscall.ENOENT
	case strings.IndexByte(name, '/') >= 0 || strings.IndexByte(name, 0) >= 0:
		if len(name) > MaxNameLen {
			return syscall.ENAMETOOLONG
		}
		return syscall.EINVAL
	}
	return nil
}

// checkLen rejects a name longer than MaxNameLen (ENAMETOOLONG). As on
// Linux, this is found only when the lookup reaches the name: after the
// search permission on its directory and after "." and "..".
func checkLen(name string) error {
	if len(name) > MaxNameLen {
		return syscall.ENAMETOOLONG
	}
	return nil
}

func isDot(name string) bool { return name == "." || name == ".." }

// validEntryName reports whether name may be a directory entry: what
// checkSyntax, checkLen and isDot accept, for a name held as bytes (Check
// looks at every entry, and makes no string of each).
func validEntryName(name []byte) bool {
	return len(name) > 0 && len(name) <= MaxNameLen &&
		bytes.IndexByte(name, '/') < 0 && bytes.IndexByte(name, 0) < 0 &&
		string(name) != "." && string(name) != ".."
}

// checkPath validates a whole path: shorter than MaxPathLen bytes, which
// counts the terminating NUL as Linux does (ENAMETOOLONG), not empty
// (ENOENT), absolute and without NUL (EINVAL). Components are checked as
// the walk reaches them.
func checkPath(path string) error {
	if len(path) >= MaxPathLen {
		return syscall.ENAMETOOLONG
	}
	if path == "" {
		return syscall.ENOENT
	}
	if path[0] != '/' || strings.IndexByte(path, 0) >= 0 {
		return syscall.EINVAL
	}
	return nil
}

// lookupIn returns the node that name denotes in directory d, which c must
// be allowed to search. "." is d itself and ".." its parent.
func (e *Engine) lookupIn(c Cred, d *node, name string) (*node, error) {
	if err := e.access(c, d, mayExec); err != nil {
		return nil, err
	}
	switch name {
	case ".":
		return d, nil
	case "..":
		return e.peek(e.parentOf(d))
	}
	if err := checkLen(name); err != nil {
		return nil, err
	}
	if _, n := e.peekChild(d, name); n != nil {
		return n, nil
	}
	if name == SnapshotDir {
		if a := e.snapArea(d); a != nil {
			return a, nil // the directory's snapshots (snapshot_state.go)
		}
	}
	return nil, syscall.ENOENT
}

// walker resolves paths, counting the symlinks it follows across one call.
type walker struct {
	e     *Engine
	c     Cred
	links int
}

// walk resolves path (absolute, or relative to dir start) to a node.
// Symlinks in the middle are always followed; one in the last component is
// followed if follow is set or the path ends in a slash.
func (w *walker) walk(start *node, path string, follow bool) (*node, error) {
	cur := start
	if strings.HasPrefix(path, "/") {
		cur = w.e.st.peek(w.e.root)
	}
	trailing := strings.HasSuffix(path, "/")
	rest := strings.Trim(path, "/")
	for rest != "" {
		var comp string
		comp, rest, _ = strings.Cut(rest, "/")
		rest = strings.TrimLeft(rest, "/")
		if comp == "" {
			continue
		}
		if !cur.isDir() {
			return nil, syscall.ENOTDIR
		}
		next, err := w.e.lookupIn(w.c, cur, comp)
		if err != nil {
			return nil, err
		}
		last := rest == ""
		if next.Mode&S_IFMT == S_IFLNK && (!last || follow || trailing) {
			w.links++
			if w.links > MaxSymlinks {
				return nil, syscall.ELOOP
			}
			if next, err = w.walk(cur, w.e.st.extraOf(next).target, true); err != nil {
				return nil, err
			}
		}
		cur = next
	}
	if trailing && !cur.isDir() {
		return nil, syscall.ENOTDIR
	}
	return cur, nil
}

// Resolve returns the attributes of the node at the absolute path. A
// symlink in the last component is followed if follow is set; all others
// always are. c needs search permission on every directory on the way.
func (e *Engine) Resolve(c Cred, path string, follow bool) (Attr, error) {
	if err := checkPath(path); err != nil {
		return Attr{}, err
	}
	w := walker{e: e, c: c}
	n, err := w.walk(e.st.peek(e.root), path, follow)
	if err != nil {
		return Attr{}, err
	}
	return e.attr(n), nil
}

// ResolveIno is Resolve returning only the inode number.
func (e *Engine) ResolveIno(c Cred, path string, follow bool) (Ino, error) {
	a, err := e.Resolve(c, path, follow)
	return a.Ino, err
}

// ResolveParent splits an absolute path into the directory that holds its
// last component, resolved, and that component's name. Trailing slashes are
// ignored; the root path yields (root, "."). The name is checked with the
// component rules; "." and ".." are returned as they are.
func (e *Engine) ResolveParent(c Cred, path string) (Ino, string, error) {
	if err := checkPath(path); err != nil {
		return 0, "", err
	}
	trimmed := strings.TrimRight(path, "/")
	if trimmed == "" {
		return e.root, ".", nil
	}
	i := strings.LastIndexByte(trimmed, '/')
	dirPath, name := trimmed[:i+1], trimmed[i+1:]
	w := walker{e: e, c: c}
	d, err := w.walk(e.st.peek(e.root), dirPath, true)
	if err != nil {
		return 0, "", err
	}
	if !d.isDir() {
		return 0, "", syscall.ENOTDIR
	}
	return d.Ino, name, nil
}
