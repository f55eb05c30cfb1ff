package engine

import (
	"fmt"
	"testing"
)

// BenchmarkCreateUnderQuota is BenchmarkCreate in directories three
// levels below a quota on the root and one on /a: each create checks and
// counts two quotas, found by walking four parents.
func BenchmarkCreateUnderQuota(b *testing.B) {
	const perDir = 10_000
	e := New(1, 1)
	c := Cred{UID: 1000, GID: 1000}
	if _, err := e.SetAttr(Root, e.Root(), SetAttr{Valid: SetMode, Mode: 0o777}, 1); err != nil {
		b.Fatal(err)
	}
	parent := e.Root()
	for _, name := range []string{"a", "b", "c"} {
		a, err := e.Mkdir(c, parent, name, 0o755, 1)
		if err != nil {
			b.Fatal(err)
		}
		parent = a.Ino
	}
	a, _ := e.Lookup(Root, e.Root(), "a")
	for _, q := range []Ino{e.Root(), a.Ino} {
		if _, err := e.SetQuota(Root, q, 1<<40, 0); err != nil {
			b.Fatal(err)
		}
	}
	names := make([]string, perDir)
	for i := range names {
		names[i] = fmt.Sprintf("f%05d", i)
	}
	var dir Ino
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%perDir == 0 {
			d, err := e.Mkdir(c, parent, fmt.Sprintf("d%d", i/perDir), 0o755, int64(i))
			if err != nil {
				b.Fatal(err)
			}
			dir = d.Ino
		}
		if _, err := e.Mknod(c, dir, names[i%perDir], S_IFREG|0o644, 0, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}
