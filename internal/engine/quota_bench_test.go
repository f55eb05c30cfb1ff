package engine

import (
	"fmt"
	"runtime"
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

// BenchmarkQuotaTagMemory reports the heap a file costs below a directory
// quota against the same files with no quota, built in the same engine
// layout: the difference is what the quota costs per file (the quota tag
// cost). Each round builds b.N files in directories of 1,000.
func BenchmarkQuotaTagMemory(b *testing.B) {
	build := func(quota bool, n int) float64 {
		e := New(1, 1)
		top, err := e.Mkdir(Root, e.Root(), "top", 0o755, 1)
		if err != nil {
			b.Fatal(err)
		}
		if quota {
			if _, err := e.SetQuota(Root, top.Ino, 1<<40, 0); err != nil {
				b.Fatal(err)
			}
		}
		before := heapInUse()
		var dir Ino
		for i := range n {
			if i%1000 == 0 {
				d, err := e.Mkdir(Root, top.Ino, fmt.Sprint("d", i/1000), 0o755, 1)
				if err != nil {
					b.Fatal(err)
				}
				dir = d.Ino
			}
			if _, err := e.Mknod(Root, dir, fmt.Sprintf("f%05d", i%1000), S_IFREG|0o644, 0, 1); err != nil {
				b.Fatal(err)
			}
		}
		per := float64(int64(heapInUse())-int64(before)) / float64(n)
		runtime.KeepAlive(e)
		return per
	}
	n := max(b.N, 100_000)
	b.ResetTimer()
	plain := build(false, n)
	under := build(true, n)
	b.ReportMetric(plain, "B/file")
	b.ReportMetric(under, "B/file-quota")
	b.ReportMetric(under-plain, "B/tag")
}
