package engine

import (
	"sort"
	"strings"
	"syscall"
)

// xattr namespaces, as on Linux.
const (
	nsUser     = "user."
	nsTrusted  = "trusted."
	nsSecurity = "security."
)

// The checks below run in the order of Linux's setxattr, getxattr and
// removexattr: the node, the flags (EINVAL), the name's length (ERANGE)
// and the value's size (E2BIG) as the call is read; then xattr_permission
// (security.* and system.* are not subject to the mode bits, but writing
// security.* needs root; trusted.* needs root; user.* exists only on
// regular files and directories; everything else follows the mode bits);
// then the namespace itself (EOPNOTSUPP for an unknown one, EINVAL for a
// bare prefix).

// checkXattrName validates the length of an attribute name: 1 to
// MaxXattrName bytes (ERANGE).
func checkXattrName(name string) error {
	if name == "" || len(name) > MaxXattrName {
		return syscall.ERANGE
	}
	return nil
}

// checkNamespace validates an attribute's namespace: user, trusted or
// security with a non-empty name after the prefix (EINVAL), or one of the
// two ACL attributes of system.* (EOPNOTSUPP otherwise).
func checkNamespace(name string) error {
	if isACLName(name) {
		return nil
	}
	for _, ns := range []string{nsUser, nsTrusted, nsSecurity} {
		if strings.HasPrefix(name, ns) {
			if len(name) == len(ns) {
				return syscall.EINVAL
			}
			return nil
		}
	}
	return syscall.EOPNOTSUPP
}

// xattrAccess checks that c may read (want = mayRead) or change (mayWrite)
// attribute name of n, as Linux's xattr_permission followed, for writes,
// by the capability check on security.*.
func (e *Engine) xattrAccess(c Cred, n *node, name string, want uint32) error {
	switch {
	case strings.HasPrefix(name, nsSecurity) || strings.HasPrefix(name, "system."):
		// No restriction from the mode bits: these belong to security
		// modules and ACLs. Writing security.* needs root.
		if want == mayWrite && strings.HasPrefix(name, nsSecurity) && !c.IsRoot() {
			return syscall.EPERM
		}
		return nil
	case strings.HasPrefix(name, nsTrusted):
		if !c.IsRoot() {
			if want == mayRead {
				return syscall.ENODATA
			}
			return syscall.EPERM
		}
		return nil
	case strings.HasPrefix(name, nsUser):
		typ := n.Mode & S_IFMT
		if typ != S_IFREG && typ != S_IFDIR {
			if want == mayRead {
				return syscall.ENODATA
			}
			return syscall.EPERM
		}
		if typ == S_IFDIR && n.Mode&S_ISVTX != 0 && want == mayWrite && !e.isOwner(c, n) {
			return syscall.EPERM
		}
	}
	return e.access(c, n, want)
}

// GetXattr returns the value of attribute name of ino (ENODATA if unset).
// The engine never changes a stored value in place, so the caller may keep
// the slice (but must not modify it).
func (e *Engine) GetXattr(c Cred, ino Ino, name string) ([]byte, error) {
	n, err := e.peek(ino)
	if err != nil {
		return nil, err
	}
	if err := checkXattrName(name); err != nil {
		return nil, err
	}
	if err := e.xattrAccess(c, n, name, mayRead); err != nil {
		return nil, err
	}
	if err := checkNamespace(name); err != nil {
		return nil, err
	}
	v, ok := e.xattrsOf(n)[name]
	if !ok {
		return nil, syscall.ENODATA
	}
	return v, nil
}

// SetXattr sets attribute name of ino to a copy of value. flags may ask
// that it be new (XattrCreate: EEXIST otherwise) or already set
// (XattrReplace: ENODATA otherwise); both together always fail with one
// of the two.
func (e *Engine) SetXattr(c Cred, ino Ino, name string, value []byte, flags uint32, now int64) error {
	n, err := e.get(ino)
	if err != nil {
		return err
	}
	if e.pinned(ino) {
		return syscall.EBUSY // moving to another partition
	}
	if err := e.roCheck(ino); err != nil {
		return err
	}
	if flags&^(XattrCreate|XattrReplace) != 0 {
		return syscall.EINVAL
	}
	if err := checkXattrName(name); err != nil {
		return err
	}
	if len(value) > MaxXattrSize {
		return syscall.E2BIG
	}
	if err := e.xattrAccess(c, n, name, mayWrite); err != nil {
		return err
	}
	if err := checkNamespace(name); err != nil {
		return err
	}
	_, exists := e.xattrsOf(n)[name]
	switch {
	case flags&XattrCreate != 0 && exists:
		return syscall.EEXIST
	case flags&XattrReplace != 0 && !exists:
		return syscall.ENODATA
	}
	if isACLName(name) {
		return e.setACL(c, n, name, value, now)
	}
	x := e.st.extra(n)
	if x.xattrs == nil {
		x.xattrs = make(map[string][]byte)
	}
	x.xattrs[name] = append([]byte(nil), value...)
	n.Ctime = now
	return nil
}

// ListXattr returns the names of ino's attributes that c may see, sorted.
// Listing needs no permission; trusted.* is hidden from all but root.
func (e *Engine) ListXattr(c Cred, ino Ino) ([]string, error) {
	n, err := e.peek(ino)
	if err != nil {
		return nil, err
	}
	xs := e.xattrsOf(n)
	names := make([]string, 0, len(xs))
	for name := range xs {
		if strings.HasPrefix(name, nsTrusted) && !c.IsRoot() {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// RemoveXattr removes attribute name of ino (ENODATA if unset).
func (e *Engine) RemoveXattr(c Cred, ino Ino, name string, now int64) error {
	n, err := e.get(ino)
	if err != nil {
		return err
	}
	if e.pinned(ino) {
		return syscall.EBUSY // moving to another partition
	}
	if err := e.roCheck(ino); err != nil {
		return err
	}
	if err := checkXattrName(name); err != nil {
		return err
	}
	if err := e.xattrAccess(c, n, name, mayWrite); err != nil {
		return err
	}
	if err := checkNamespace(name); err != nil {
		return err
	}
	if isACLName(name) {
		return e.changeACL(c, n, name, nil, now)
	}
	if _, ok := e.xattrsOf(n)[name]; !ok {
		return syscall.ENODATA
	}
	x := e.st.extraMut(n)
	delete(x.xattrs, name)
	if len(x.xattrs) == 0 {
		x.xattrs = nil
		e.st.dropExtraIfEmpty(n)
	}
	n.Ctime = now
	return nil
}

// xattrsOf returns n's attributes, nil when it has none.
func (e *Engine) xattrsOf(n *node) map[string][]byte {
	if x := e.st.extraOf(n); x != nil {
		return x.xattrs
	}
	return nil
}
