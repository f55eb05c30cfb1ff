package engine

import (
	"encoding/binary"
	"syscall"
)

// POSIX ACLs (POSIX.1e draft 17, as Linux implements them). A node's
// access ACL and a directory's default ACL are kept as the attributes
// XattrACLAccess and XattrACLDefault, in Linux's binary form, so they are
// logged, checkpointed and dumped with the other attributes. The owner,
// owning group (or mask) and other entries of an access ACL are kept equal
// to the mode's permission bits: chmod rewrites them and setting the ACL
// sets the mode, as Linux's posix_acl_chmod and posix_acl_update_mode.

// The attributes that hold ACLs.
const (
	XattrACLAccess  = "system.posix_acl_access"
	XattrACLDefault = "system.posix_acl_default"
)

// The binary form: a 4-byte little-endian version, then 8-byte entries of
// tag (2 bytes), permission bits (2) and id (4).
const (
	aclVersion    = 2
	aclHeaderSize = 4
	aclEntrySize  = 8
)

// ACL entry tags, as in Linux's posix_acl.h.
const (
	ACLUserObj  = 0x01
	ACLUser     = 0x02
	ACLGroupObj = 0x04
	ACLGroup    = 0x08
	ACLMask     = 0x10
	ACLOther    = 0x20
)

// aclEntry is one entry of an ACL.
type aclEntry struct {
	tag  uint16
	perm uint16
	id   uint32
}

// aclAt returns entry i of a validated ACL value v.
func aclAt(v []byte, i int) aclEntry {
	o := aclHeaderSize + i*aclEntrySize
	return aclEntry{
		tag:  binary.LittleEndian.Uint16(v[o:]),
		perm: binary.LittleEndian.Uint16(v[o+2:]),
		id:   binary.LittleEndian.Uint32(v[o+4:]),
	}
}

// aclCount is the number of entries of a validated ACL value v.
func aclCount(v []byte) int { return (len(v) - aclHeaderSize) / aclEntrySize }

// ValidateACL checks that v is a well-formed ACL in the binary form, as
// Linux's posix_acl_from_xattr and posix_acl_valid: the version (and a
// size of whole entries: EINVAL), known tags, permission bits within rwx,
// the entries in order (owner, named users by ascending id, owning group,
// named groups by ascending id, mask, other) with exactly one owner,
// owning group and other entry, and a mask when there is a named entry.
// A header with no entries is valid: it stands for no ACL.
func ValidateACL(v []byte) error {
	if len(v) < aclHeaderSize || (len(v)-aclHeaderSize)%aclEntrySize != 0 {
		return syscall.EINVAL
	}
	if binary.LittleEndian.Uint32(v) != aclVersion {
		return syscall.EINVAL
	}
	n := aclCount(v)
	if n == 0 {
		return nil
	}
	// state is the rank of the last tag seen; tags must not go back.
	rank := func(tag uint16) int {
		switch tag {
		case ACLUserObj:
			return 1
		case ACLUser:
			return 2
		case ACLGroupObj:
			return 3
		case ACLGroup:
			return 4
		case ACLMask:
			return 5
		case ACLOther:
			return 6
		}
		return 0
	}
	state, named, lastID := 0, false, uint32(0)
	for i := 0; i < n; i++ {
		e := aclAt(v, i)
		if e.perm&^7 != 0 {
			return syscall.EINVAL
		}
		r := rank(e.tag)
		switch {
		case r == 0:
			return syscall.EINVAL
		case r == 2 || r == 4: // named: repeatable, ids strictly ascending
			if r < state || r == state && e.id <= lastID {
				return syscall.EINVAL
			}
			named, lastID = true, e.id
		default: // single entries, each exactly once
			if r <= state {
				return syscall.EINVAL
			}
		}
		// The single entries before this one must all be present.
		for want := state + 1; want < r; want++ {
			if want != 2 && want != 4 && want != 5 {
				return syscall.EINVAL
			}
		}
		state = r
	}
	if state != 6 {
		return syscall.EINVAL
	}
	if named && !aclHas(v, ACLMask) {
		return syscall.EINVAL
	}
	return nil
}

// aclHas reports whether validated ACL v has an entry with tag.
func aclHas(v []byte, tag uint16) bool {
	for i := 0; i < aclCount(v); i++ {
		if aclAt(v, i).tag == tag {
			return true
		}
	}
	return false
}

// aclOf returns n's ACL of the given attribute name, nil if it has none.
func (e *Engine) aclOf(n *node, name string) []byte {
	x := e.st.extraOf(n)
	if x == nil || x.xattrs == nil {
		return nil
	}
	return x.xattrs[name]
}

// aclPermits is Linux's posix_acl_permission for a caller c that does not
// own the node: the first matching named user, or any matching owning or
// named group whose entry grants want, limited by the mask; other if no
// group matched.
func (e *Engine) aclPermits(c Cred, n *node, acl []byte, want uint32) bool {
	cnt := aclCount(acl)
	matched := -1
	found := false
loop:
	for i := 0; i < cnt; i++ {
		a := aclAt(acl, i)
		switch a.tag {
		case ACLUser:
			if a.id == c.UID {
				matched = i
				break loop
			}
		case ACLGroupObj:
			if c.InGroup(e.gid(n)) {
				found = true
				if uint32(a.perm)&want == want {
					matched = i
					break loop
				}
			}
		case ACLGroup:
			if c.InGroup(a.id) {
				found = true
				if uint32(a.perm)&want == want {
					matched = i
					break loop
				}
			}
		case ACLOther:
			if found {
				return false
			}
			return uint32(a.perm)&want == want
		}
	}
	if matched < 0 {
		return false
	}
	perm := uint32(aclAt(acl, matched).perm)
	for i := matched + 1; i < cnt; i++ {
		if m := aclAt(acl, i); m.tag == ACLMask {
			perm &= uint32(m.perm)
			break
		}
	}
	return perm&want == want
}

// aclEquivMode returns the permission bits that validated ACL v gives the
// owner, group class (the mask if there is one) and others, and whether v
// says nothing more than those bits (no named entries, no mask).
func aclEquivMode(v []byte) (perm uint32, equiv bool) {
	equiv = true
	var group, mask uint32
	hasMask := false
	for i := 0; i < aclCount(v); i++ {
		a := aclAt(v, i)
		p := uint32(a.perm)
		switch a.tag {
		case ACLUserObj:
			perm |= p << 6
		case ACLGroupObj:
			group = p
		case ACLOther:
			perm |= p
		case ACLMask:
			mask, hasMask = p, true
			equiv = false
		default:
			equiv = false
		}
	}
	if hasMask {
		return perm | mask<<3, equiv
	}
	return perm | group<<3, equiv
}

// aclWithMode returns a copy of validated ACL v with the owner, group
// class (mask, or owning group without one) and other entries set from
// mode's permission bits, as Linux's posix_acl_chmod.
func aclWithMode(v []byte, mode uint32) []byte {
	out := append([]byte(nil), v...)
	hasMask := aclHas(v, ACLMask)
	for i := 0; i < aclCount(v); i++ {
		o := aclHeaderSize + i*aclEntrySize
		var p uint32
		switch tag := binary.LittleEndian.Uint16(v[o:]); {
		case tag == ACLUserObj:
			p = mode >> 6 & 7
		case tag == ACLMask, tag == ACLGroupObj && !hasMask:
			p = mode >> 3 & 7
		case tag == ACLOther:
			p = mode & 7
		default:
			continue
		}
		binary.LittleEndian.PutUint16(out[o+2:], uint16(p))
	}
	return out
}

// aclCreateMasq returns the access ACL a new node gets from its parent's
// default ACL def and the mode it asked for, and the node's mode, as
// Linux's posix_acl_create_masq: each of owner, group class and other
// keeps only the bits both the ACL and the mode grant. The ACL is nil
// when it says no more than the mode.
func aclCreateMasq(def []byte, mode uint32) ([]byte, uint32) {
	acl := append([]byte(nil), def...)
	m := mode
	hasMask := aclHas(def, ACLMask)
	equiv := !hasMask
	set := func(i int, p uint32) {
		binary.LittleEndian.PutUint16(acl[aclHeaderSize+i*aclEntrySize+2:], uint16(p))
	}
	for i := 0; i < aclCount(def); i++ {
		a := aclAt(def, i)
		p := uint32(a.perm)
		switch {
		case a.tag == ACLUserObj:
			p &= m >> 6 & 7
			m = m&^0o700 | p<<6
		case a.tag == ACLOther:
			p &= m & 7
			m = m&^0o007 | p
		case a.tag == ACLMask, a.tag == ACLGroupObj && !hasMask:
			p &= m >> 3 & 7
			m = m&^0o070 | p<<3
		case a.tag == ACLUser, a.tag == ACLGroup:
			equiv = false
			continue
		default:
			continue
		}
		set(i, p)
	}
	if equiv {
		return nil, m
	}
	return acl, m
}

// inheritACL gives new node n (just made in directory d, with its mode as
// asked for) the ACLs of d's default ACL: an access ACL masked by its mode
// and, for a directory, the default ACL itself. With no default ACL the
// umask applies instead. Symlinks take neither.
func (e *Engine) inheritACL(d, n *node, umask uint32) {
	typ := n.Mode & S_IFMT
	if typ == S_IFLNK {
		return
	}
	def := e.aclOf(d, XattrACLDefault)
	if def == nil {
		n.Mode &^= umask & 0o777
		return
	}
	acl, mode := aclCreateMasq(def, n.Mode&0o7777)
	n.Mode = typ | mode
	if acl == nil && typ != S_IFDIR {
		return
	}
	x := e.st.extra(n)
	if x.xattrs == nil {
		x.xattrs = make(map[string][]byte, 2)
	}
	if acl != nil {
		x.xattrs[XattrACLAccess] = acl
	}
	if typ == S_IFDIR {
		x.xattrs[XattrACLDefault] = append([]byte(nil), def...)
	}
}

// setACL is SetXattr for the ACL attributes, after the flag checks, in
// the order of Linux's setxattr and set_posix_acl (confirmed on Linux
// 6.18): the framing (EINVAL; a version other than 2 is EOPNOTSUPP), then
// changeACL.
func (e *Engine) setACL(c Cred, n *node, name string, value []byte, now int64) error {
	if len(value) < aclHeaderSize || (len(value)-aclHeaderSize)%aclEntrySize != 0 {
		return syscall.EINVAL
	}
	if binary.LittleEndian.Uint32(value) != aclVersion {
		return syscall.EOPNOTSUPP
	}
	return e.changeACL(c, n, name, value, now)
}

// changeACL sets (value with entries) or removes (nil or a header alone)
// an ACL: symlinks have none (EOPNOTSUPP); a default ACL is on
// directories only (EACCES; removing one elsewhere succeeds); only the
// owner or root may change one (EPERM); then the ACL must be valid
// (EINVAL). An access ACL sets the mode's permission bits, and is not kept
// when it says no more than they do. Removing an ACL, present or not,
// succeeds and leaves the mode as it is.
func (e *Engine) changeACL(c Cred, n *node, name string, value []byte, now int64) error {
	if n.Mode&S_IFMT == S_IFLNK {
		return syscall.EOPNOTSUPP
	}
	keep := len(value) > aclHeaderSize
	if name == XattrACLDefault && !n.isDir() {
		if !keep {
			return nil
		}
		return syscall.EACCES
	}
	if !e.isOwner(c, n) {
		return syscall.EPERM
	}
	if keep {
		if err := ValidateACL(value); err != nil {
			return err
		}
	}
	if keep && name == XattrACLAccess {
		perm, equiv := aclEquivMode(value)
		mode := n.Mode&^0o777 | perm
		if !c.IsRoot() && !c.InGroup(e.gid(n)) {
			mode &^= S_ISGID
		}
		n.Mode = mode
		keep = !equiv
	}
	if keep {
		x := e.st.extra(n)
		if x.xattrs == nil {
			x.xattrs = make(map[string][]byte)
		}
		x.xattrs[name] = append([]byte(nil), value...)
	} else if e.aclOf(n, name) != nil {
		x := e.st.extraMut(n)
		delete(x.xattrs, name)
		if len(x.xattrs) == 0 {
			x.xattrs = nil
			e.st.dropExtraIfEmpty(n)
		}
	}
	n.Ctime = now
	return nil
}

// chmodACL rewrites n's access ACL, if it has one, to agree with its new
// mode.
func (e *Engine) chmodACL(n *node) {
	acl := e.aclOf(n, XattrACLAccess)
	if acl == nil {
		return
	}
	e.st.extraMut(n).xattrs[XattrACLAccess] = aclWithMode(acl, n.Mode)
}

// isACLName reports whether name is one of the ACL attributes.
func isACLName(name string) bool { return name == XattrACLAccess || name == XattrACLDefault }
