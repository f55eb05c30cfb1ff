package engine

import "fmt"

// checkACLs verifies the ACL attributes (acl.go): each is a valid ACL
// with entries, a default ACL is on a directory, and an access ACL says
// more than the mode (a mask or a named entry) and agrees with the mode's
// permission bits (owner, mask, other).
func (e *Engine) checkACLs() error {
	for ino, n := range e.st.all() {
		for _, name := range []string{XattrACLAccess, XattrACLDefault} {
			v := e.aclOf(n, name)
			if v == nil {
				continue
			}
			if err := ValidateACL(v); err != nil || aclCount(v) == 0 {
				return fmt.Errorf("node %d: %s is not a valid ACL (%d bytes)", ino, name, len(v))
			}
			if name == XattrACLDefault {
				if !n.isDir() {
					return fmt.Errorf("node %d: a default ACL on a non-directory", ino)
				}
				continue
			}
			perm, equiv := aclEquivMode(v)
			if equiv {
				return fmt.Errorf("node %d: an access ACL of base entries only (the mode alone says it)", ino)
			}
			if perm != n.Mode&0o777 {
				return fmt.Errorf("node %d: access ACL gives %03o, mode has %03o", ino, perm, n.Mode&0o777)
			}
		}
	}
	return nil
}
