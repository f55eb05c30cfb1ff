package engine

import "syscall"

// Access bits, as in access(2).
const (
	mayRead  = 4
	mayWrite = 2
	mayExec  = 1
)

// access checks that c may access n in every way that want asks for, as
// Linux's acl_permission_check: the owner class if c owns n; else, if n
// has an access ACL and its group class (the mask) grants anything, the
// ACL (acl.go); else the group class if c is in n's group, else the other
// class. Root passes, except that executing a non-directory needs some
// execute bit.
func (e *Engine) access(c Cred, n *node, want uint32) error {
	mode := n.Mode
	if c.IsRoot() {
		if want&mayExec != 0 && !n.isDir() && mode&0o111 == 0 {
			return syscall.EACCES
		}
		return nil
	}
	var bits uint32
	switch {
	case c.UID == e.uid(n):
		bits = mode >> 6 & 7
	case mode&0o070 != 0 && e.aclOf(n, XattrACLAccess) != nil:
		if !e.aclPermits(c, n, e.aclOf(n, XattrACLAccess), want) {
			return syscall.EACCES
		}
		return nil
	case c.InGroup(e.gid(n)):
		bits = mode >> 3 & 7
	default:
		bits = mode & 7
	}
	if bits&want != want {
		return syscall.EACCES
	}
	return nil
}

// isOwner reports whether c owns n or is root.
func (e *Engine) isOwner(c Cred, n *node) bool { return c.IsRoot() || c.UID == e.uid(n) }

// mayDelete checks that c may remove or replace the entry of victim in dir
// d: write and search permission on d and, if d is sticky, ownership of d
// or of victim (EPERM otherwise), as Linux's may_delete.
func (e *Engine) mayDelete(c Cred, d, victim *node) error {
	if err := e.access(c, d, mayWrite|mayExec); err != nil {
		return err
	}
	if d.Mode&S_ISVTX != 0 && !c.IsRoot() && c.UID != e.uid(d) && c.UID != e.uid(victim) {
		return syscall.EPERM
	}
	return nil
}
