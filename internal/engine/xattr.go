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

// checkXattrName validates an attribute name: not empty and at most
// MaxXattrName bytes (ERANGE), in the user, trusted or security namespace
// (EOPNOTSUPP; system.* holds ACLs, which are not supported).
func checkXattrName(name string) error {
	if name == "" || len(name) > MaxXattrName {
		return syscall.ERANGE
	}
	for _, ns := range []string{nsUser, nsTrusted, nsSecurity} {
		if strings.HasPrefix(name, ns) && len(name) > len(ns) {
			return nil
		}
	}
	return syscall.EOPNOTSUPP
}

// xattrAccess checks that c may read (want = mayRead) or change (mayWrite)
// attribute name of n.
func xattrAccess(c Cred, n *node, name string, want uint32) error {
	switch {
	case strings.HasPrefix(name, nsTrusted):
		if !c.IsRoot() {
			if want == mayRead {
				return syscall.ENODATA
			}
			return syscall.EPERM
		}
	case strings.HasPrefix(name, nsSecurity):
		if want == mayWrite && !isOwner(c, n) {
			return syscall.EPERM
		}
	default: // user.*
		typ := n.attr.Mode & S_IFMT
		if typ != S_IFREG && typ != S_IFDIR {
			if want == mayRead {
				return syscall.ENODATA
			}
			return syscall.EPERM
		}
		if n.attr.Mode&S_ISVTX != 0 && typ == S_IFDIR && want == mayWrite && !isOwner(c, n) {
			return syscall.EPERM
		}
		return access(c, n, want)
	}
	return nil
}

// GetXattr returns the value of attribute name of ino (ENODATA if unset).
func (e *Engine) GetXattr(c Cred, ino Ino, name string) ([]byte, error) {
	n, err := e.get(ino)
	if err != nil {
		return nil, err
	}
	if err := checkXattrName(name); err != nil {
		return nil, err
	}
	if err := xattrAccess(c, n, name, mayRead); err != nil {
		return nil, err
	}
	v, ok := n.xattrs[name]
	if !ok {
		return nil, syscall.ENODATA
	}
	return v, nil
}

// SetXattr sets attribute name of ino to a copy of value. flags may ask
// that it be new (XattrCreate: EEXIST otherwise) or already set
// (XattrReplace: ENODATA otherwise).
func (e *Engine) SetXattr(c Cred, ino Ino, name string, value []byte, flags uint32, now int64) error {
	n, err := e.get(ino)
	if err != nil {
		return err
	}
	if flags&^(XattrCreate|XattrReplace) != 0 || flags == XattrCreate|XattrReplace {
		return syscall.EINVAL
	}
	if err := checkXattrName(name); err != nil {
		return err
	}
	if len(value) > MaxXattrSize {
		return syscall.E2BIG
	}
	if err := xattrAccess(c, n, name, mayWrite); err != nil {
		return err
	}
	_, exists := n.xattrs[name]
	switch {
	case flags&XattrCreate != 0 && exists:
		return syscall.EEXIST
	case flags&XattrReplace != 0 && !exists:
		return syscall.ENODATA
	}
	if n.xattrs == nil {
		n.xattrs = make(map[string][]byte)
	}
	n.xattrs[name] = append([]byte(nil), value...)
	n.attr.Ctime = now
	return nil
}

// ListXattr returns the names of ino's attributes that c may see, sorted.
func (e *Engine) ListXattr(c Cred, ino Ino) ([]string, error) {
	n, err := e.get(ino)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(n.xattrs))
	for name := range n.xattrs {
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
	if err := checkXattrName(name); err != nil {
		return err
	}
	if err := xattrAccess(c, n, name, mayWrite); err != nil {
		return err
	}
	if _, ok := n.xattrs[name]; !ok {
		return syscall.ENODATA
	}
	delete(n.xattrs, name)
	if len(n.xattrs) == 0 {
		n.xattrs = nil
	}
	n.attr.Ctime = now
	return nil
}
