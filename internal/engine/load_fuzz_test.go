package engine

import (
	"bytes"
	"os"
	"testing"
)

// loadSeed is a checkpoint of a small namespace with every kind of node
// and record the format holds: the fuzz tree's directories, files, fifos
// and symlinks, an xattr, a device, a directory large enough to have an
// index and one packed by the idle sweep, files of one slice and of
// several, an open file without links, and garbage.
func loadSeed(tb testing.TB) []byte {
	tb.Helper()
	e := New(3, 1)
	fuzzTree(tb, e)
	now := int64(20)
	big, err := e.Mkdir(credRoot, e.Root(), "big", 0o755, now)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range 40 {
		if _, err := e.Mknod(credRoot, big.Ino, "e"+decimalString(i), 0o644, 0, now); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := e.Mknod(credRoot, big.Ino, "dev", S_IFCHR|0o600, 0x0801, now); err != nil {
		tb.Fatal(err)
	}
	f, _ := e.Lookup(credRoot, big.Ino, "e1")
	if err := e.SetXattr(credRoot, f.Ino, "user.k", []byte("v"), 0, now); err != nil {
		tb.Fatal(err)
	}
	id, _, _ := e.AllocSlices(e.Root(), 8)
	one, _ := e.Lookup(credRoot, big.Ino, "e2")
	if _, err := e.Commit(credRoot, one.Ino, []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}}}, 0, 0, now); err != nil {
		tb.Fatal(err)
	}
	two, _ := e.Lookup(credRoot, big.Ino, "e3")
	for k := uint64(1); k <= 3; k++ {
		if _, err := e.Commit(credRoot, two.Ino, []SliceWrite{{Chunk: uint32(k), Slice: Slice{ID: id + k, Size: 10, Len: 10, Pos: uint32(k)}}}, 0, 0, now); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := e.Open(credRoot, two.Ino, OpenReadOnly); err != nil {
		tb.Fatal(err)
	}
	if err := e.Unlink(credRoot, big.Ino, "e3", now); err != nil {
		tb.Fatal(err)
	}
	if err := e.Unlink(credRoot, big.Ino, "e2", now); err != nil { // its slice becomes garbage
		tb.Fatal(err)
	}
	for e.CompactIdle(1<<20) > 0 {
	}
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzLoad feeds damaged checkpoints to Load: it may refuse them but must
// not panic, loading in parallel and on one goroutine must agree, and
// what it accepts passes Check, answers a listing of every
// directory, and writes a checkpoint that loads again to the same bytes.
func FuzzLoad(f *testing.F) {
	seed := loadSeed(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add(intentsSeed(f))
	f.Add(ownerQuotasSeed(f))
	f.Add(inlineSeed(f))
	for _, s := range forwardsSeed(f) {
		f.Add(s)
	}
	if v1, err := os.ReadFile("testdata/intents-v1.ckpt"); err == nil {
		f.Add(v1)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := loadBoth(t, data) // parallel and serial agree
		if err != nil {
			return
		}
		if err := e.Check(); err != nil {
			t.Fatalf("loaded, but: %v", err)
		}
		for _, n := range e.st.all() {
			if n.isDir() {
				if _, _, _, err := e.Readdir(Root, n.Ino, "", 0, true); err != nil {
					t.Fatalf("readdir %d: %v", n.Ino, err)
				}
			}
		}
		var again bytes.Buffer
		if err := e.WriteCheckpoint(&again); err != nil {
			t.Fatal(err)
		}
		e2, err := Load(bytes.NewReader(again.Bytes()))
		if err != nil {
			t.Fatalf("a checkpoint of what loaded does not load: %v", err)
		}
		var third bytes.Buffer
		if err := e2.WriteCheckpoint(&third); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), third.Bytes()) {
			t.Fatal("checkpoint, load, checkpoint changed the bytes")
		}
	})
}

// intentsSeed is a checkpoint holding intents of renames across
// partitions: a prepared source, a prepared target of an exchange (which
// pins its node) and a committed source with its image.
func intentsSeed(tb testing.TB) []byte {
	tb.Helper()
	e := New(3, 1)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := e.Mknod(credRoot, e.Root(), name, S_IFREG|0o644, 0, 2); err != nil {
			tb.Fatal(err)
		}
	}
	c, _ := e.Lookup(credRoot, e.Root(), "c")
	id, _, _ := e.AllocSlices(e.Root(), 1)
	if _, err := e.Commit(credRoot, c.Ino, []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}}}, 0, 0, 3); err != nil {
		tb.Fatal(err)
	}
	if err := e.SetXattr(credRoot, c.Ino, "user.k", []byte("v"), 0, 3); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.XPrepareSource(credRoot, XID{1}, e.Root(), "a", 0, 4, nil, 4); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.XPrepareTarget(credRoot, XID{2}, e.Root(), "b", RenameExchange, 4, false, XSize{}, nil, 4); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.XPrepareSource(credRoot, XID{3}, e.Root(), "c", 0, 4, nil, 4); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.XCommitSource(XID{3}, nil, nil, 5); err != nil {
		tb.Fatal(err)
	}
	// A directory on its way, with a file and a directory below it, and
	// an empty directory pinned for one arriving.
	d, _ := e.Mkdir(credRoot, e.Root(), "d", 0o755, 5)
	sub, _ := e.Mkdir(credRoot, d.Ino, "sub", 0o700, 5)
	if _, err := e.Symlink(credRoot, sub.Ino, "l", "../x", 5); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.XPrepareSource(credRoot, XID{6}, e.Root(), "d", 0, 4, nil, 6); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.XCommitSource(XID{6}, nil, nil, 6); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.Mkdir(credRoot, e.Root(), "empty", 0o755, 6); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.XPrepareTarget(credRoot, XID{7}, e.Root(), "empty", 0, 4, true, XSize{Nodes: 3}, nil, 6); err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// inlineSeed is a checkpoint holding inline slices: one of a file, one of
// a clone sharing it, and one of a node on its way to another partition.
func inlineSeed(tb testing.TB) []byte {
	tb.Helper()
	e := New(4, 1)
	ino, _ := commitInline(tb, e, "a", []byte("first"), 2)
	commitInline(tb, e, "b", []byte{0, 1, 2, 0xff}, 2)
	if _, err := e.Clone(credRoot, ino, e.Root(), "a2", 3); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.XPrepareSource(credRoot, XID{5}, e.Root(), "b", 0, 1, nil, 4); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.XCommitSource(XID{5}, nil, nil, 5); err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
