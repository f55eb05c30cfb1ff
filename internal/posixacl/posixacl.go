// Package posixacl converts POSIX ACLs between Linux's binary extended
// attribute form (system.posix_acl_access and system.posix_acl_default:
// a version 2 header, then entries of tag, permission bits and id) and the
// text form of setfacl and getfacl ("u::rw,u:1000:rw,g::r,m::rw,o::r").
// It holds no state; its functions may be called from any goroutine.
package posixacl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Entry tags, as in Linux's posix_acl.h.
const (
	UserObj  = 0x01
	User     = 0x02
	GroupObj = 0x04
	Group    = 0x08
	Mask     = 0x10
	Other    = 0x20
)

// ErrSyntax is returned (wrapped) for text that is not an ACL.
var ErrSyntax = errors.New("malformed ACL")

// Entry is one ACL entry. ID is meaningful for User and Group only.
type Entry struct {
	Tag  uint16
	Perm uint16 // rwx as 4, 2, 1
	ID   uint32
}

// ACL is a list of entries, in the canonical order once Sorted.
type ACL []Entry

// Encode returns the binary form of a.
func (a ACL) Encode() []byte {
	b := make([]byte, 4, 4+8*len(a))
	binary.LittleEndian.PutUint32(b, 2)
	for _, e := range a {
		b = binary.LittleEndian.AppendUint16(b, e.Tag)
		b = binary.LittleEndian.AppendUint16(b, e.Perm)
		id := e.ID
		if e.Tag != User && e.Tag != Group {
			id = 0xFFFFFFFF // ACL_UNDEFINED_ID, as setfacl writes it
		}
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	return b
}

// Decode parses the binary form, checking only its framing (the service
// checks the rest when it is set).
func Decode(b []byte) (ACL, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 || binary.LittleEndian.Uint32(b) != 2 {
		return nil, fmt.Errorf("%w: bad header or size %d", ErrSyntax, len(b))
	}
	a := make(ACL, 0, (len(b)-4)/8)
	for o := 4; o < len(b); o += 8 {
		a = append(a, Entry{
			Tag:  binary.LittleEndian.Uint16(b[o:]),
			Perm: binary.LittleEndian.Uint16(b[o+2:]),
			ID:   binary.LittleEndian.Uint32(b[o+4:]),
		})
	}
	return a, nil
}

// rank orders tags as the binary form requires.
func rank(tag uint16) int {
	switch tag {
	case UserObj:
		return 1
	case User:
		return 2
	case GroupObj:
		return 3
	case Group:
		return 4
	case Mask:
		return 5
	case Other:
		return 6
	}
	return 7
}

// Sort puts a in the canonical order: owner, named users by id, owning
// group, named groups by id, mask, other.
func (a ACL) Sort() {
	sort.SliceStable(a, func(i, j int) bool {
		ri, rj := rank(a[i].Tag), rank(a[j].Tag)
		if ri != rj {
			return ri < rj
		}
		return a[i].ID < a[j].ID
	})
}

// FromMode returns the three-entry ACL that says what mode's permission
// bits say.
func FromMode(mode uint32) ACL {
	return ACL{
		{Tag: UserObj, Perm: uint16(mode >> 6 & 7)},
		{Tag: GroupObj, Perm: uint16(mode >> 3 & 7)},
		{Tag: Other, Perm: uint16(mode & 7)},
	}
}

// Merge sets the entries of b in a (replacing an entry with the same tag
// and id), and, unless b names a mask, recomputes the mask as the union
// of the group class (named users, owning group, named groups) when a
// named entry exists, as setfacl -m does. The result is sorted.
func Merge(a, b ACL) ACL {
	out := append(ACL(nil), a...)
	explicitMask := false
	for _, e := range b {
		if e.Tag == Mask {
			explicitMask = true
		}
		replaced := false
		for i := range out {
			if out[i].Tag == e.Tag && (e.Tag != User && e.Tag != Group || out[i].ID == e.ID) {
				out[i], replaced = e, true
				break
			}
		}
		if !replaced {
			out = append(out, e)
		}
	}
	if !explicitMask {
		var union uint16
		named, mi := false, -1
		for i, e := range out {
			switch e.Tag {
			case User, Group:
				named = true
				union |= e.Perm
			case GroupObj:
				union |= e.Perm
			case Mask:
				mi = i
			}
		}
		switch {
		case mi >= 0:
			out[mi].Perm = union
		case named:
			out = append(out, Entry{Tag: Mask, Perm: union})
		}
	}
	out.Sort()
	return out
}

// Parse reads the text form: entries separated by commas (or newlines),
// each "tag:qualifier:perms" with tag u[ser], g[roup], m[ask] or o[ther],
// a numeric qualifier for named users and groups (empty for the others),
// and perms of r, w, x and -. A "d:" or "default:" prefix puts an entry in
// the second ACL returned, the default one. Comments (#) and blank lines
// are skipped, so getfacl's output reads back.
func Parse(text string) (access, def ACL, err error) {
	for _, f := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == '\n' }) {
		f = strings.TrimSpace(f)
		if f == "" || strings.HasPrefix(f, "#") {
			continue
		}
		isDef := false
		for _, p := range []string{"default:", "d:"} {
			if strings.HasPrefix(f, p) {
				f, isDef = f[len(p):], true
				break
			}
		}
		e, err := parseEntry(f)
		if err != nil {
			return nil, nil, err
		}
		if isDef {
			def = append(def, e)
		} else {
			access = append(access, e)
		}
	}
	return access, def, nil
}

func parseEntry(f string) (Entry, error) {
	parts := strings.Split(f, ":")
	if len(parts) != 3 {
		return Entry{}, fmt.Errorf("%w: %q: want tag:qualifier:perms", ErrSyntax, f)
	}
	var e Entry
	q := parts[1]
	switch parts[0] {
	case "u", "user":
		e.Tag = UserObj
		if q != "" {
			e.Tag = User
		}
	case "g", "group":
		e.Tag = GroupObj
		if q != "" {
			e.Tag = Group
		}
	case "m", "mask":
		e.Tag = Mask
	case "o", "other":
		e.Tag = Other
	default:
		return Entry{}, fmt.Errorf("%w: %q: unknown tag %q", ErrSyntax, f, parts[0])
	}
	if e.Tag == User || e.Tag == Group {
		id, err := strconv.ParseUint(q, 10, 32)
		if err != nil {
			return Entry{}, fmt.Errorf("%w: %q: qualifier %q is not a numeric id", ErrSyntax, f, q)
		}
		e.ID = uint32(id)
	} else if q != "" {
		return Entry{}, fmt.Errorf("%w: %q: %s entries take no qualifier", ErrSyntax, f, parts[0])
	}
	for _, r := range parts[2] {
		switch r {
		case 'r':
			e.Perm |= 4
		case 'w':
			e.Perm |= 2
		case 'x':
			e.Perm |= 1
		case '-':
		default:
			return Entry{}, fmt.Errorf("%w: %q: bad permission %q", ErrSyntax, f, r)
		}
	}
	return e, nil
}

// PermString is perm as getfacl prints it ("rw-").
func PermString(perm uint16) string {
	b := []byte("---")
	if perm&4 != 0 {
		b[0] = 'r'
	}
	if perm&2 != 0 {
		b[1] = 'w'
	}
	if perm&1 != 0 {
		b[2] = 'x'
	}
	return string(b)
}

// String is the text form of a in getfacl's long spelling, one entry per
// line, without the effective-rights comments.
func (a ACL) String() string {
	var sb strings.Builder
	for _, e := range a {
		sb.WriteString(e.Text())
		sb.WriteByte('\n')
	}
	return sb.String()
}

// Text is e in getfacl's spelling ("user:1000:rw-").
func (e Entry) Text() string {
	var tag, q string
	switch e.Tag {
	case UserObj:
		tag = "user"
	case User:
		tag, q = "user", strconv.FormatUint(uint64(e.ID), 10)
	case GroupObj:
		tag = "group"
	case Group:
		tag, q = "group", strconv.FormatUint(uint64(e.ID), 10)
	case Mask:
		tag = "mask"
	case Other:
		tag = "other"
	default:
		tag = fmt.Sprintf("tag%#x", e.Tag)
	}
	return tag + ":" + q + ":" + PermString(e.Perm)
}
