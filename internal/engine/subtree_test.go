package engine

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
)

// TestFreezeSubtree dumps directory b1 of three (5,000 files each, so
// the slab spans chunks) from a freeze while the engine goes on
// changing all three: the bytes equal those of a dump written at the
// freeze, and load into a namespace whose root is b1 with its files.
func TestFreezeSubtree(t *testing.T) {
	const fill = 5000
	e := New(0, 1)
	bulkFill(t, e, fill)
	b1, err := e.Lookup(Cred{}, e.Root(), "b1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetXattr(Cred{}, b1.Ino, "user.top", []byte("b1"), 0, 4); err != nil {
		t.Fatal(err)
	}
	// Quotas on the top and on a directory outside: only the top's comes
	// along, as the root's.
	b0, err := e.Lookup(Cred{}, e.Root(), "b0")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []Ino{b1.Ino, b0.Ino} {
		if _, err := e.SetQuota(Cred{}, d, 100000, 0); err != nil {
			t.Fatal(err)
		}
	}
	at, err := e.FreezeSubtree(b1.Ino)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := at.WriteCheckpoint(&want); err != nil {
		t.Fatal(err)
	}
	at.Release()

	frozen, err := e.FreezeSubtree(b1.Ino)
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range bulkOps(3, 3000, fill) {
		op(e, int64(10+i))
	}
	var got bytes.Buffer
	if err := frozen.WriteCheckpoint(&got); err != nil {
		t.Fatal(err)
	}
	if frozen.Nodes() != fill+1 {
		t.Errorf("subtree of %d nodes, want %d", frozen.Nodes(), fill+1)
	}
	frozen.Release()
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("subtree dumped from a freeze after changes: %d bytes, differs from the %d at the freeze", got.Len(), want.Len())
	}

	l, err := Load(&want)
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != fill+1 {
		t.Fatalf("loaded subtree holds %d nodes, want %d", l.Len(), fill+1)
	}
	if _, err := l.Lookup(Cred{}, l.Root(), "f4999"); err != nil {
		t.Errorf("f4999: %v", err)
	}
	if _, err := l.Lookup(Cred{}, l.Root(), "b0"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("b0 in b1's subtree: %v", err)
	}
	if v, err := l.GetXattr(Cred{}, l.Root(), "user.top"); err != nil || string(v) != "b1" {
		t.Errorf("the root's xattr: %q %v", v, err)
	}
	if qs := l.Quotas(); len(qs) != 1 || qs[0].Dir != l.Root() || qs[0].MaxFiles != 100000 || qs[0].Files != fill {
		t.Errorf("the loaded subtree's quotas: %+v, want the root's with %d files", qs, fill)
	}

	f0, _ := e.Lookup(Cred{}, b1.Ino, "f0")
	for ino, want := range map[Ino]error{f0.Ino: syscall.ENOTDIR, 1 << 40: syscall.ENOENT} {
		if f0.Ino == 0 {
			continue
		}
		if _, err := e.FreezeSubtree(ino); !errors.Is(err, want) {
			t.Errorf("freeze subtree %d: %v, want %v", ino, err, want)
		}
	}
}
