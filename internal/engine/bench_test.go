package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// bigDir returns an engine whose directory /big holds n regular files
// f0000000 ... and their inode numbers.
func bigDir(b *testing.B, n int) (*Engine, Ino, []Ino, []string) {
	b.Helper()
	e := New(1, 1)
	d, err := e.Mkdir(Root, e.Root(), "big", 0o755, 2)
	if err != nil {
		b.Fatal(err)
	}
	inos := make([]Ino, n)
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("f%07d", i)
		a, err := e.Mknod(Root, d.Ino, names[i], S_IFREG|0o644, 0, int64(3+i))
		if err != nil {
			b.Fatal(err)
		}
		inos[i] = a.Ino
	}
	return e, d.Ino, inos, names
}

func BenchmarkGetAttr(b *testing.B) {
	e, _, inos, _ := bigDir(b, 100_000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := e.GetAttr(inos[i%len(inos)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	e, dir, _, names := bigDir(b, 100_000)
	c := Cred{UID: 1000, GID: 1000}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := e.Lookup(c, dir, names[i%len(names)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreate makes regular files in directories that fill up to
// 10,000 entries each, then moves on to a fresh directory.
func BenchmarkCreate(b *testing.B) { benchCreate(b, 0) }

// BenchmarkCreateFrozen is BenchmarkCreate with a freeze always live, a
// new one every 10,000 files (as if a checkpoint were always being
// written), so that creates keep meeting chunks and directories the
// freeze shares.
func BenchmarkCreateFrozen(b *testing.B) { benchCreate(b, 10_000) }

func benchCreate(b *testing.B, refreeze int) {
	const perDir = 10_000
	e := New(1, 1)
	c := Cred{UID: 1000, GID: 1000}
	if _, err := e.SetAttr(Root, e.Root(), SetAttr{Valid: SetMode, Mode: 0o777}, 1); err != nil {
		b.Fatal(err)
	}
	names := make([]string, perDir)
	for i := range names {
		names[i] = fmt.Sprintf("f%05d", i)
	}
	var dir Ino
	var f *Frozen
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if refreeze > 0 && i%refreeze == 0 {
			if f != nil {
				f.Release()
			}
			f = e.Freeze()
		}
		if i%perDir == 0 {
			a, err := e.Mkdir(c, e.Root(), fmt.Sprintf("d%d", i/perDir), 0o755, int64(i))
			if err != nil {
				b.Fatal(err)
			}
			dir = a.Ino
		}
		if _, err := e.Mknod(c, dir, names[i%perDir], S_IFREG|0o644, 0, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolve resolves a five-deep path as a non-root caller.
func BenchmarkResolve(b *testing.B) {
	e := New(1, 1)
	parent := e.Root()
	for _, name := range []string{"usr", "share", "doc", "canopy"} {
		a, err := e.Mkdir(Root, parent, name, 0o755, 1)
		if err != nil {
			b.Fatal(err)
		}
		parent = a.Ino
	}
	if _, err := e.Mknod(Root, parent, "README.md", S_IFREG|0o644, 0, 1); err != nil {
		b.Fatal(err)
	}
	c := Cred{UID: 1000, GID: 1000}
	const path = "/usr/share/doc/canopy/README.md"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Resolve(c, path, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirstAccessPacked measures the first lookup in an idle
// directory of 1,000 entries that the sweep has packed: it inflates the
// directory. Each iteration packs one of 100 such directories again and
// times the lookup alone; p99_us is the 99th percentile of those lookups.
func BenchmarkFirstAccessPacked(b *testing.B) {
	const dirs, perDir = 100, 1000
	e := New(1, 1)
	inos := make([]Ino, dirs)
	for k := range dirs {
		a, err := e.Mkdir(Root, e.Root(), fmt.Sprintf("mdtest_tree.%d", k), 0o755, 2)
		if err != nil {
			b.Fatal(err)
		}
		inos[k] = a.Ino
		for i := range perDir {
			if _, err := e.Mknod(Root, a.Ino, fmt.Sprintf("file.mdtest.0.%d", i), S_IFREG|0o644, 0, 3); err != nil {
				b.Fatal(err)
			}
		}
	}
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		d := e.st.extraOf(e.node(inos[i%dirs])).dir
		b.StopTimer()
		d.pack()
		name := fmt.Sprintf("file.mdtest.0.%d", i%perDir)
		b.StartTimer()
		start := time.Now()
		if _, err := e.Lookup(Root, inos[i%dirs], name); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50_us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99_us")
}

// BenchmarkFreeze takes and releases a freeze of a million files: the
// pause a checkpoint costs the owner goroutine.
func BenchmarkFreeze(b *testing.B) {
	e, _, _, _ := bigDir(b, 1_000_000)
	b.ReportAllocs()
	for b.Loop() {
		e.Freeze().Release()
	}
}
