package engine

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/internal/posixacl"
)

// FuzzACL feeds arbitrary values to the ACL parser, which faces the
// network (setxattr of system.posix_acl_*). A value is either refused
// (EINVAL; EOPNOTSUPP for a version other than 2; EACCES for a default
// ACL on a file) or valid; a valid one is stored as given (or, for an access
// ACL of base entries only, folded into the mode), and the ACLs derived
// from it by chmod and by inheritance on create are valid too. The seed
// corpus is testdata/fuzz/FuzzACL.
func FuzzACL(f *testing.F) {
	for _, s := range []string{"u::rw,g::r,o::-", "u::rw,u:1000:rw,g::r,g:7:x,m::rw,o::r", "u::rwx,g::rx,m::-,o::x"} {
		a, _, _ := posixacl.Parse(s)
		f.Add(a.Encode(), uint16(0o640))
	}
	f.Add([]byte{2, 0, 0, 0}, uint16(0o777))
	f.Add([]byte{2, 0, 0, 0, 1, 0, 6}, uint16(0o600))
	f.Fuzz(func(t *testing.T, v []byte, mode uint16) {
		err := ValidateACL(v)
		if err != nil && !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("ValidateACL: %v, want nil or EINVAL", err)
		}
		e, d, fi := aclFixture(t)
		for _, ino := range []Ino{d, fi} {
			for _, name := range []string{XattrACLAccess, XattrACLDefault} {
				serr := e.SetXattr(credRoot, ino, name, v, 0, 5)
				framed := len(v) >= 4 && (len(v)-4)%8 == 0
				switch {
				case framed && v[0] == 2 && v[1] == 0 && v[2] == 0 && v[3] == 0 && name == XattrACLDefault && ino == fi:
					if len(v) > 4 && !errors.Is(serr, syscall.EACCES) || len(v) == 4 && serr != nil {
						t.Fatalf("default ACL on a file: %v, want EACCES (nil for an empty one)", serr)
					}
				case framed && err != nil && binary.LittleEndian.Uint32(v) != 2:
					if !errors.Is(serr, syscall.EOPNOTSUPP) {
						t.Fatalf("set of an ACL of another version: %v, want EOPNOTSUPP", serr)
					}
				case err != nil:
					if !errors.Is(serr, syscall.EINVAL) {
						t.Fatalf("set of an invalid ACL on %d: %v, want EINVAL", ino, serr)
					}
				case serr != nil:
					t.Fatalf("set of a valid ACL on %d: %v", ino, serr)
				}
			}
		}
		if err != nil || aclCount(v) == 0 {
			return
		}
		m := uint32(mode) & 0o7777
		if err := ValidateACL(aclWithMode(v, m)); err != nil {
			t.Fatalf("chmod %o made an invalid ACL: %v", m, err)
		}
		if acl, _ := aclCreateMasq(v, m); acl != nil {
			if err := ValidateACL(acl); err != nil {
				t.Fatalf("inheritance with mode %o made an invalid ACL: %v", m, err)
			}
		}
		// Every caller gets an answer, and the owner's comes from the
		// mode alone.
		n, _ := e.get(fi)
		for _, c := range []Cred{credU1, credU2, {UID: 1000, GID: 1000}, {UID: 7, GID: 7, Groups: []uint32{1000}}} {
			_ = e.access(c, n, mayRead|mayWrite)
		}
		if _, err := e.SetAttr(credRoot, d, SetAttr{Valid: SetMode, Mode: m}, 6); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Mkdir(credRoot, d, "sub", m, 7); err != nil {
			t.Fatal(err)
		}
	})
}
