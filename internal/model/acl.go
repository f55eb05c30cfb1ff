package model

import (
	"encoding/binary"
	"syscall"
)

// POSIX ACLs, as the model has them: the attributes
// system.posix_acl_access and system.posix_acl_default in Linux's binary
// form (version 2, then entries of 2-byte tag, 2-byte permission bits and
// 4-byte id). Written from the POSIX.1e draft and Linux's posix_acl.c, not
// from the engine: a value is valid when its entries come in the order
// owner, named users (ids rising), owning group, named groups (ids
// rising), mask, other, with one each of owner, owning group and other,
// and a mask if any entry is named. Only the owner or root sets or removes
// one (EPERM); symlinks have none (EOPNOTSUPP); a default ACL is on
// directories only (EACCES). An access ACL gives its owner, mask (or
// owning group) and other bits to the mode and is not kept when it has
// neither mask nor named entry; chmod gives them back to it. A new node in
// a directory with a default ACL gets it masked by the mode asked for (no
// umask in the model), a directory also as its default ACL.

// ACL attribute names.
const (
	ACLAccess  = "system.posix_acl_access"
	ACLDefault = "system.posix_acl_default"
)

const (
	tUserObj  = 1
	tUser     = 2
	tGroupObj = 4
	tGroup    = 8
	tMask     = 16
	tOther    = 32
)

type aclEnt struct {
	tag, perm uint16
	id        uint32
}

// parseACL decodes and checks an ACL value; ok is false for one Linux
// refuses with EINVAL. An empty ACL (a header alone) is valid and nil.
func parseACL(v []byte) (ents []aclEnt, ok bool) {
	if len(v) < 4 || (len(v)-4)%8 != 0 || binary.LittleEndian.Uint32(v) != 2 {
		return nil, false
	}
	for o := 4; o < len(v); o += 8 {
		ents = append(ents, aclEnt{binary.LittleEndian.Uint16(v[o:]), binary.LittleEndian.Uint16(v[o+2:]), binary.LittleEndian.Uint32(v[o+4:])})
	}
	if len(ents) == 0 {
		return nil, true
	}
	order := []uint16{tUserObj, tUser, tGroupObj, tGroup, tMask, tOther}
	pos, named, count := 0, false, map[uint16]int{}
	var lastID uint32
	for i, e := range ents {
		if e.perm > 7 {
			return nil, false
		}
		k := -1
		for j, t := range order {
			if t == e.tag {
				k = j
			}
		}
		if k < pos {
			return nil, false
		}
		if e.tag == tUser || e.tag == tGroup {
			if k == pos && i > 0 && ents[i-1].tag == e.tag && e.id <= lastID {
				return nil, false
			}
			named, lastID = true, e.id
		}
		count[e.tag]++
		pos = k
	}
	if count[tUserObj] != 1 || count[tGroupObj] != 1 || count[tOther] != 1 || count[tMask] > 1 || named && count[tMask] == 0 {
		return nil, false
	}
	return ents, true
}

func encodeACL(ents []aclEnt) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range ents {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// hasMask reports whether ents has a mask entry.
func hasMask(ents []aclEnt) bool {
	for _, e := range ents {
		if e.tag == tMask {
			return true
		}
	}
	return false
}

// classOf is the mode class (shift 6, 3 or 0) an entry stands for in the
// mode, or -1 for one that has none.
func classOf(e aclEnt, mask bool) int {
	switch {
	case e.tag == tUserObj:
		return 6
	case e.tag == tMask, e.tag == tGroupObj && !mask:
		return 3
	case e.tag == tOther:
		return 0
	}
	return -1
}

// setACL is setxattr (value) or removexattr (nil) of an ACL name after
// the generic checks, in Linux's order: the framing (EINVAL, EOPNOTSUPP
// for another version), a symlink (EOPNOTSUPP), a default ACL on a
// non-directory (EACCES; nothing to do when removing), a non-owner
// (EPERM), the entries (EINVAL). Removing succeeds whether or not there is
// one.
func (m *Oracle) setACL(c Cred, n *node, name string, v []byte, now int64) error {
	var ents []aclEnt
	if v != nil {
		if len(v) < 4 || (len(v)-4)%8 != 0 {
			return syscall.EINVAL
		}
		if binary.LittleEndian.Uint32(v) != 2 {
			return syscall.EOPNOTSUPP
		}
	}
	if n.typ == S_IFLNK {
		return syscall.EOPNOTSUPP
	}
	keep := len(v) > 4
	if name == ACLDefault && !n.dir() {
		if !keep {
			return nil
		}
		return syscall.EACCES
	}
	if !ownerOrRoot(c, n) {
		return syscall.EPERM
	}
	if keep {
		var ok bool
		if ents, ok = parseACL(v); !ok {
			return syscall.EINVAL
		}
	}
	if keep && name == ACLAccess {
		mask := hasMask(ents)
		perm := uint32(0)
		extended := mask
		for _, e := range ents {
			if s := classOf(e, mask); s >= 0 {
				perm |= uint32(e.perm) << s
			} else if e.tag == tUser || e.tag == tGroup {
				extended = true
			}
		}
		n.perm = n.perm&^0o777 | perm
		if c.UID != 0 && !inGroup(c, n.gid) {
			n.perm &^= S_ISGID
		}
		keep = extended
	}
	if keep {
		n.xattrs[name] = append([]byte(nil), v...)
	} else {
		delete(n.xattrs, name)
	}
	n.ctime = now
	return nil
}

// aclPermits is posix_acl_permission for a caller who is not the owner;
// handled is false when the node has no ACL to consult (none, or a mode
// with no group bits).
func aclPermits(c Cred, n *node, want uint32) (allowed, handled bool) {
	v, ok := n.xattrs[ACLAccess]
	if !ok || n.perm&0o070 == 0 {
		return false, false
	}
	ents, _ := parseACL(v)
	var mask uint32 = 7
	for _, e := range ents {
		if e.tag == tMask {
			mask = uint32(e.perm)
		}
	}
	groupMatched := false
	for _, e := range ents {
		p := uint32(e.perm)
		switch {
		case e.tag == tUser && e.id == c.UID:
			return p&mask&want == want, true
		case e.tag == tGroupObj && inGroup(c, n.gid), e.tag == tGroup && inGroup(c, e.id):
			groupMatched = true
			if p&want == want {
				return p&mask&want == want, true
			}
		}
	}
	if groupMatched {
		return false, true
	}
	return n.perm&7&want == want, true
}

// chmodACL gives a node's new mode to its access ACL.
func chmodACL(n *node) {
	v, ok := n.xattrs[ACLAccess]
	if !ok {
		return
	}
	ents, _ := parseACL(v)
	mask := hasMask(ents)
	for i, e := range ents {
		if s := classOf(e, mask); s >= 0 {
			ents[i].perm = uint16(n.perm >> s & 7)
		}
	}
	n.xattrs[ACLAccess] = encodeACL(ents)
}

// inheritACL gives new node n the default ACL of its directory d.
func inheritACL(d, n *node) {
	v, ok := d.xattrs[ACLDefault]
	if !ok || n.typ == S_IFLNK {
		return
	}
	ents, _ := parseACL(v)
	mask := hasMask(ents)
	extended := mask
	for i, e := range ents {
		s := classOf(e, mask)
		if s < 0 {
			extended = extended || e.tag == tUser || e.tag == tGroup
			continue
		}
		p := uint32(e.perm) & (n.perm >> s & 7)
		ents[i].perm = uint16(p)
		n.perm = n.perm&^(7<<s) | p<<s
	}
	if extended {
		n.xattrs[ACLAccess] = encodeACL(ents)
	}
	if n.dir() {
		n.xattrs[ACLDefault] = append([]byte(nil), v...)
	}
}

// aclValues are the ACL values the generator sets: valid ones of each
// shape (base entries only, named user and group, an empty mask, the
// empty ACL) and malformed ones.
var aclValues = func() [][]byte {
	e := func(tag, perm uint16, id uint32) aclEnt { return aclEnt{tag, perm, id} }
	valid := [][]aclEnt{
		{e(tUserObj, 6, 0), e(tGroupObj, 4, 0), e(tOther, 4, 0)},
		{e(tUserObj, 7, 0), e(tUser, 6, 1000), e(tGroupObj, 5, 0), e(tMask, 7, 0), e(tOther, 0, 0)},
		{e(tUserObj, 7, 0), e(tUser, 7, 1001), e(tGroupObj, 0, 0), e(tGroup, 6, 2000), e(tMask, 6, 0), e(tOther, 1, 0)},
		{e(tUserObj, 6, 0), e(tUser, 6, 1000), e(tGroupObj, 4, 0), e(tMask, 0, 0), e(tOther, 4, 0)},
		{e(tUserObj, 7, 0), e(tGroupObj, 7, 0), e(tGroup, 7, 1000), e(tMask, 5, 0), e(tOther, 5, 0)},
		{},
	}
	bad := [][]aclEnt{
		{e(tUserObj, 6, 0), e(tUser, 6, 1000), e(tGroupObj, 4, 0), e(tOther, 0, 0)}, // named, no mask
		{e(tGroupObj, 4, 0), e(tUserObj, 6, 0), e(tOther, 0, 0)},                    // out of order
		{e(tUserObj, 9, 0), e(tGroupObj, 4, 0), e(tOther, 0, 0)},                    // bits beyond rwx
	}
	var out [][]byte
	for _, a := range append(valid, bad...) {
		out = append(out, encodeACL(a))
	}
	return append(out, []byte{2, 0, 0, 0, 1}, []byte{3, 0, 0, 0})
}()
