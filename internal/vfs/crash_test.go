package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// contents reports what a file holds on m: its contents, or ok=false if
// it does not exist.
func contents(t *testing.T, m *MemFS, name string) (data string, ok bool) {
	t.Helper()
	f, err := m.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func mustWrite(t *testing.T, f File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCrashDropsUnsyncedBytes(t *testing.T) {
	m := NewMem()
	f, err := m.Create("f")
	must(t, err)
	mustWrite(t, f, "synced")
	must(t, f.Sync())
	must(t, m.SyncDir("/"))
	mustWrite(t, f, " unsynced")

	if got, ok := contents(t, m.Crash(), "f"); !ok || got != "synced" {
		t.Fatalf("after crash: %q, %v; want %q", got, ok, "synced")
	}
	if got, _ := contents(t, m, "f"); got != "synced unsynced" {
		t.Fatalf("Crash changed the original: %q", got)
	}
}

func TestCrashDropsUnsyncedCreate(t *testing.T) {
	m := NewMem()
	f, err := m.Create("f")
	must(t, err)
	mustWrite(t, f, "data")
	must(t, f.Sync())

	if _, ok := contents(t, m.Crash(), "f"); ok {
		t.Fatal("file created without SyncDir survived the crash")
	}
	must(t, m.SyncDir("."))
	if got, ok := contents(t, m.Crash(), "f"); !ok || got != "data" {
		t.Fatalf("after SyncDir and crash: %q, %v; want %q", got, ok, "data")
	}
}

func TestCrashKeepsEntryWithoutUnsyncedBytes(t *testing.T) {
	m := NewMem()
	f, err := m.Create("f")
	must(t, err)
	must(t, m.SyncDir("/"))
	mustWrite(t, f, "never synced")
	if got, ok := contents(t, m.Crash(), "f"); !ok || got != "" {
		t.Fatalf("after crash: %q, %v; want an empty file", got, ok)
	}
}

func TestCrashRenameDurableOnlyAfterSyncDir(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("d"))
	must(t, m.SyncDir("/"))
	for _, name := range []string{"d/old", "d/target"} {
		f, err := m.Create(name)
		must(t, err)
		mustWrite(t, f, name)
		must(t, f.Sync())
		must(t, f.Close())
	}
	must(t, m.SyncDir("d"))

	must(t, m.Rename("d/old", "d/target"))
	c := m.Crash()
	if got, _ := contents(t, c, "d/old"); got != "d/old" {
		t.Errorf("before SyncDir: d/old = %q, want it back", got)
	}
	if got, _ := contents(t, c, "d/target"); got != "d/target" {
		t.Errorf("before SyncDir: d/target = %q, want its old contents", got)
	}

	must(t, m.SyncDir("d"))
	c = m.Crash()
	if _, ok := contents(t, c, "d/old"); ok {
		t.Error("after SyncDir: d/old still exists")
	}
	if got, _ := contents(t, c, "d/target"); got != "d/old" {
		t.Errorf("after SyncDir: d/target = %q, want %q", got, "d/old")
	}
}

func TestCrashRemoveDurableOnlyAfterSyncDir(t *testing.T) {
	m := NewMem()
	f, err := m.Create("f")
	must(t, err)
	mustWrite(t, f, "x")
	must(t, f.Sync())
	must(t, m.SyncDir("/"))
	must(t, m.Remove("f"))
	if _, ok := contents(t, m.Crash(), "f"); !ok {
		t.Error("remove without SyncDir was durable")
	}
	must(t, m.SyncDir("/"))
	if _, ok := contents(t, m.Crash(), "f"); ok {
		t.Error("remove with SyncDir was not durable")
	}
}

func TestCrashNewDirectoryNeedsParentSync(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("a/b"))
	f, err := m.Create("a/b/f")
	must(t, err)
	must(t, f.Sync())
	must(t, m.SyncDir("a/b"))
	if names, _ := m.Crash().ReadDir("/"); len(names) != 0 {
		t.Fatalf("unsynced directory survived: root holds %q", names)
	}
	must(t, m.SyncDir("a"))
	must(t, m.SyncDir("/"))
	if _, ok := contents(t, m.Crash(), "a/b/f"); !ok {
		t.Fatal("a/b/f lost after syncing every directory on its path")
	}
}

func TestCrashTruncateNeedsSync(t *testing.T) {
	m := NewMem()
	f, err := m.Create("f")
	must(t, err)
	mustWrite(t, f, "0123456789")
	must(t, f.Sync())
	must(t, m.SyncDir("/"))
	must(t, m.Truncate("f", 3))
	mustWrite(t, f, "abc") // at offset 10: a hole from 3 to 10
	if got, _ := contents(t, m.Crash(), "f"); got != "0123456789" {
		t.Fatalf("unsynced truncate was durable: %q", got)
	}
	must(t, f.Sync())
	if got, _ := contents(t, m.Crash(), "f"); got != "012\x00\x00\x00\x00\x00\x00\x00abc" {
		t.Fatalf("after Sync: %q", got)
	}
}

func TestCrashIsIndependent(t *testing.T) {
	m := NewMem()
	f, err := m.Create("f")
	must(t, err)
	mustWrite(t, f, "x")
	must(t, f.Sync())
	must(t, m.SyncDir("/"))
	c := m.Crash()

	g, err := c.OpenWrite("f")
	must(t, err)
	_, err = g.WriteAt([]byte("from crash"), 1)
	must(t, err)
	mustWrite(t, f, "from original")
	must(t, f.Sync())
	if got, _ := contents(t, c, "f"); got != "xfrom crash" {
		t.Errorf("crashed FS: %q", got)
	}
	if got, _ := contents(t, m, "f"); got != "xfrom original" {
		t.Errorf("original FS: %q", got)
	}
}

func TestCrashTornKeepsPrefixOfAppend(t *testing.T) {
	m := NewMem()
	f, err := m.Create("f")
	must(t, err)
	mustWrite(t, f, "synced|")
	must(t, f.Sync())
	must(t, m.SyncDir("/"))
	mustWrite(t, f, "appended")

	rng := rand.New(rand.NewPCG(1, 2))
	seen := make(map[int]bool)
	for range 200 {
		got, ok := contents(t, m.CrashTorn(rng), "f")
		if !ok {
			t.Fatal("file lost")
		}
		if want := "synced|appended"; !bytes.HasPrefix([]byte(want), []byte(got)) || len(got) < len("synced|") {
			t.Fatalf("torn crash gave %q: not a prefix of %q that keeps the synced bytes", got, want)
		}
		seen[len(got)] = true
	}
	if len(seen) != len("appended")+1 {
		t.Errorf("torn lengths seen: %v; want every length from synced to full", slices.Sorted(maps.Keys(seen)))
	}

	// Same seed, same history, same result.
	a, _ := contents(t, m.CrashTorn(rand.New(rand.NewPCG(7, 7))), "f")
	b, _ := contents(t, m.CrashTorn(rand.New(rand.NewPCG(7, 7))), "f")
	if a != b {
		t.Errorf("CrashTorn not reproducible: %q vs %q", a, b)
	}

	// A file rewritten below its synced length keeps only its synced bytes.
	must(t, m.Truncate("f", 0))
	mustWrite(t, f, "rewritten and longer than before")
	for range 20 {
		if got, _ := contents(t, m.CrashTorn(rng), "f"); got != "synced|" {
			t.Fatalf("torn crash of a rewritten file gave %q", got)
		}
	}
}

// TestCrashTornKeepsPrefixOfOverwrite: bytes written over synced ones (a
// log writing into space it prepared) tear as a prefix of the new bytes
// followed by the old, and Datasync makes them durable as Sync does.
func TestCrashTornKeepsPrefixOfOverwrite(t *testing.T) {
	m := NewMem()
	f, err := m.Create("f")
	must(t, err)
	mustWrite(t, f, "head|0000000000")
	must(t, f.Sync())
	must(t, m.SyncDir("/"))
	_, err = f.WriteAt([]byte("new"), 5)
	must(t, err)

	rng := rand.New(rand.NewPCG(3, 4))
	seen := make(map[string]bool)
	for range 200 {
		got, _ := contents(t, m.CrashTorn(rng), "f")
		seen[got] = true
	}
	want := []string{"head|0000000000", "head|n000000000", "head|ne00000000", "head|new0000000"}
	if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, want) {
		t.Errorf("torn overwrites seen %q, want %q", got, want)
	}
	if got, _ := contents(t, m.Crash(), "f"); got != "head|0000000000" {
		t.Errorf("crash before the sync kept %q", got)
	}
	must(t, f.Datasync())
	if got, _ := contents(t, m.Crash(), "f"); got != "head|new0000000" {
		t.Errorf("crash after Datasync kept %q", got)
	}
}

func TestMemFSConcurrentUse(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("d"))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			name := fmt.Sprintf("d/f%d", g)
			f, err := m.Create(name)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for i := range 200 {
				if _, err := f.Write([]byte{byte(i)}); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					if err := f.Sync(); err != nil {
						t.Error(err)
					}
					if err := m.SyncDir("d"); err != nil {
						t.Error(err)
					}
					m.Crash()
				}
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			if _, err := m.ReadDir("d"); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	for g := range 4 {
		if size, err := m.Size(fmt.Sprintf("d/f%d", g)); err != nil || size != 200 {
			t.Errorf("f%d: size %d, %v; want 200", g, size, err)
		}
	}
}
