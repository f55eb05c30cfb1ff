package engine

import "testing"

// BenchmarkLookupACL is BenchmarkLookup in a directory with an access ACL
// that names the caller's group, so every lookup's search check runs the
// ACL algorithm.
func BenchmarkLookupACL(b *testing.B) {
	e, dir, _, names := bigDir(b, 100_000)
	if err := e.SetXattr(Root, dir, XattrACLAccess, aclBytes(b, "u::rwx,u:7:rwx,g::r-x,g:1000:rx,m::rwx,o::-"), 0, 1); err != nil {
		b.Fatal(err)
	}
	c := Cred{UID: 1000, GID: 1000}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := e.Lookup(c, dir, names[i%len(names)]); err != nil {
			b.Fatal(err)
		}
	}
}
