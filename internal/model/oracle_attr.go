package model

// The oracle's attribute and extended-attribute operations.

import (
	"sort"
	"strings"
	"syscall"
)

// dropSGID is setattr_should_drop_sgid (Linux 6.2 and later): a
// set-group-id bit goes if the group may execute, or if the caller is
// neither in the file's group nor privileged.
func dropSGID(c Cred, perm, gid uint32) bool {
	if perm&S_ISGID == 0 {
		return false
	}
	return perm&0o010 != 0 || (c.UID != 0 && !inGroup(c, gid))
}

// SetAttr is one of chmod, chown, truncate and utimensat on a descriptor,
// with their checks: notify_change refuses a mode change on a symlink
// (EOPNOTSUPP, Linux 6.6 and later); truncate needs a regular file
// (EISDIR, EINVAL) and write permission (EACCES); setattr_prepare lets a
// non-root caller "change" the owner only to itself when it owns the node,
// and the group only to one of its groups (EPERM); chmod needs ownership
// (EPERM); setting times to anything but "both now" needs ownership
// (EPERM), "both now" needs ownership or write permission (EACCES).
func (m *Oracle) SetAttr(c Cred, ino Ino, s SetAttr, now int64) (Attr, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return Attr{}, syscall.ENOENT
	}
	if err := m.roErr(n); err != nil {
		return Attr{}, err
	}
	v := s.Valid
	root := c.UID == 0
	owner := ownerOrRoot(c, n)
	if v&SetMode != 0 && n.typ == S_IFLNK {
		return Attr{}, syscall.EOPNOTSUPP
	}
	if v&SetSize != 0 {
		switch {
		case n.dir():
			return Attr{}, syscall.EISDIR
		case n.typ != S_IFREG:
			return Attr{}, syscall.EINVAL
		case !permits(c, n, permW):
			return Attr{}, syscall.EACCES
		}
	}
	if v&SetUID != 0 && !root && !(c.UID == n.uid && s.UID == n.uid) {
		return Attr{}, syscall.EPERM
	}
	if v&SetGID != 0 && !root && !(c.UID == n.uid && (s.GID == n.gid || inGroup(c, s.GID))) {
		return Attr{}, syscall.EPERM
	}
	if v&SetMode != 0 && !owner {
		return Attr{}, syscall.EPERM
	}
	if v&(SetAtime|SetMtime|SetAtimeNow|SetMtimeNow) != 0 {
		touch := v&(SetAtime|SetMtime|SetAtimeNow|SetMtimeNow) == SetAtimeNow|SetMtimeNow
		switch {
		case touch && !owner && !permits(c, n, permW):
			return Attr{}, syscall.EACCES
		case !touch && !owner:
			return Attr{}, syscall.EPERM
		}
	}
	if v == 0 {
		return m.attr(n), nil
	}
	if v&SetSize != 0 {
		if err := m.quotaGrow(n, s.Size); err != nil {
			return Attr{}, err
		}
	}
	if v&(SetUID|SetGID) != 0 {
		oldGID := n.gid
		if v&SetUID != 0 {
			n.uid = s.UID
		}
		if v&SetGID != 0 {
			n.gid = s.GID
		}
		if !n.dir() {
			if dropSGID(c, n.perm, oldGID) {
				n.perm &^= S_ISGID
			}
			n.perm &^= S_ISUID
		}
	}
	if v&SetMode != 0 {
		n.perm = s.Mode & 0o7777
		if !root && !inGroup(c, n.gid) {
			n.perm &^= S_ISGID
		}
		chmodACL(n)
	}
	if v&SetSize != 0 {
		if !root {
			if dropSGID(c, n.perm, n.gid) {
				n.perm &^= S_ISGID
			}
			n.perm &^= S_ISUID
		}
		n.size = s.Size
		n.mtime = now
	}
	switch {
	case v&SetAtimeNow != 0:
		n.atime = now
	case v&SetAtime != 0:
		n.atime = s.Atime
	}
	switch {
	case v&SetMtimeNow != 0:
		n.mtime = now
	case v&SetMtime != 0:
		n.mtime = s.Mtime
	}
	n.ctime = now
	return m.attr(n), nil
}

// ---- namespace: extended attributes ----

// checkXattrNameLen is the copy-in of the name: empty or longer than
// XATTR_NAME_MAX is ERANGE.
func checkXattrNameLen(name string) error {
	if name == "" || len(name) > XattrName {
		return syscall.ERANGE
	}
	return nil
}

// xattrPerm is xattr_permission (write: mayWrite) followed, for writes, by
// the capability hook that reserves security.* to CAP_SYS_ADMIN.
func xattrPerm(c Cred, n *node, name string, write bool) error {
	want := uint32(permR)
	if write {
		want = permW
	}
	switch {
	case strings.HasPrefix(name, "security.") || strings.HasPrefix(name, "system."):
		if write && strings.HasPrefix(name, "security.") && c.UID != 0 {
			return syscall.EPERM
		}
		return nil
	case strings.HasPrefix(name, "trusted."):
		if c.UID != 0 {
			if write {
				return syscall.EPERM
			}
			return syscall.ENODATA
		}
		return nil
	case strings.HasPrefix(name, "user."):
		if n.typ != S_IFREG && !n.dir() {
			if write {
				return syscall.EPERM
			}
			return syscall.ENODATA
		}
		if write && n.dir() && n.perm&S_ISVTX != 0 && !ownerOrRoot(c, n) {
			return syscall.EPERM
		}
	}
	if !permits(c, n, want) {
		return syscall.EACCES
	}
	return nil
}

// xattrHandler is xattr_resolve_name: the user, trusted and security
// namespaces exist, and of system.* the two POSIX ACLs (acl.go); a bare
// prefix is EINVAL.
func xattrHandler(name string) error {
	if name == ACLAccess || name == ACLDefault {
		return nil
	}
	for _, ns := range []string{"user.", "trusted.", "security."} {
		if strings.HasPrefix(name, ns) {
			if name == ns {
				return syscall.EINVAL
			}
			return nil
		}
	}
	return syscall.EOPNOTSUPP
}

func (m *Oracle) GetXattr(c Cred, ino Ino, name string) ([]byte, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return nil, syscall.ENOENT
	}
	if err := checkXattrNameLen(name); err != nil {
		return nil, err
	}
	if err := xattrPerm(c, n, name, false); err != nil {
		return nil, err
	}
	if err := xattrHandler(name); err != nil {
		return nil, err
	}
	v, ok := n.xattrs[name]
	if !ok {
		return nil, syscall.ENODATA
	}
	return v, nil
}

// SetXattr is setxattr: unknown flag bits are EINVAL; XATTR_CREATE and
// XATTR_REPLACE together are not, they just can never both hold.
func (m *Oracle) SetXattr(c Cred, ino Ino, name string, value []byte, flags uint32, now int64) error {
	n, ok := m.nodes[ino]
	if !ok {
		return syscall.ENOENT
	}
	if err := m.roErr(n); err != nil {
		return err
	}
	if flags&^(XattrCreate|XattrReplace) != 0 {
		return syscall.EINVAL
	}
	if err := checkXattrNameLen(name); err != nil {
		return err
	}
	if len(value) > XattrValue {
		return syscall.E2BIG
	}
	if err := xattrPerm(c, n, name, true); err != nil {
		return err
	}
	if err := xattrHandler(name); err != nil {
		return err
	}
	_, exists := n.xattrs[name]
	if exists && flags&XattrCreate != 0 {
		return syscall.EEXIST
	}
	if !exists && flags&XattrReplace != 0 {
		return syscall.ENODATA
	}
	if name == ACLAccess || name == ACLDefault {
		return m.setACL(c, n, name, value, now)
	}
	n.xattrs[name] = append([]byte(nil), value...)
	n.ctime = now
	return nil
}

func (m *Oracle) ListXattr(c Cred, ino Ino) ([]string, error) {
	n, ok := m.nodes[ino]
	if !ok {
		return nil, syscall.ENOENT
	}
	names := []string{}
	for name := range n.xattrs {
		if c.UID != 0 && strings.HasPrefix(name, "trusted.") {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

func (m *Oracle) RemoveXattr(c Cred, ino Ino, name string, now int64) error {
	n, ok := m.nodes[ino]
	if !ok {
		return syscall.ENOENT
	}
	if err := m.roErr(n); err != nil {
		return err
	}
	if err := checkXattrNameLen(name); err != nil {
		return err
	}
	if err := xattrPerm(c, n, name, true); err != nil {
		return err
	}
	if err := xattrHandler(name); err != nil {
		return err
	}
	if name == ACLAccess || name == ACLDefault {
		return m.setACL(c, n, name, nil, now)
	}
	if _, ok := n.xattrs[name]; !ok {
		return syscall.ENODATA
	}
	delete(n.xattrs, name)
	n.ctime = now
	return nil
}
