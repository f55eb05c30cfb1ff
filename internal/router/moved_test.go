package router

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/client"
)

// TestMovedNodesKeepTheirNumbers: a directory renamed to another
// partition, and then on to a third, is still reached by the inode
// numbers it and its file had before (as a mount's node ids and a
// working directory hold them): getattr, lookup, readdir, create,
// rename within it and unlink by the old directory number act on the
// directory where it is now, and the old file number reads the file.
// A number whose node was removed after it moved answers ENOENT or
// ESTALE, not another node.
func TestMovedNodesKeepTheirNumbers(t *testing.T) {
	f := newXFixture(t, Config{})
	ctx := testCtx(t)
	c := f.c
	for _, d := range []string{"/p1/d/work/sub", "/p2/d"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MkdirAll(ctx, "/p1/d/work/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("canopy"), 100)
	if err := c.WriteFile(ctx, "/p1/d/work/sub/f", data, 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := c.Stat(ctx, "/p1/d/work")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Stat(ctx, "/p1/d/work/sub")
	if err != nil {
		t.Fatal(err)
	}
	file, err := c.Stat(ctx, "/p1/d/work/sub/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/p1/d/work", "/p2/d/work"); err != nil {
		t.Fatal(err)
	}
	now, err := c.Stat(ctx, "/p2/d/work")
	if err != nil || now.Ino() == dir.Ino() {
		t.Fatalf("after the move: %v, inode %d (was %d)", err, now.Ino(), dir.Ino())
	}

	check := func(where string) {
		t.Helper()
		at, err := c.GetAttr(ctx, dir.Ino())
		if err != nil || !at.IsDir() {
			t.Fatalf("getattr of the old number: %v", err)
		}
		if fi, err := c.Lookup(ctx, dir.Ino(), "sub"); err != nil || !fi.IsDir() {
			t.Fatalf("lookup in the old number: %v", err)
		}
		ents, _, _, err := c.ReadDirIno(ctx, sub.Ino(), "", 100, false)
		if err != nil || len(ents) != 1 || ents[0].Name() != "f" {
			t.Fatalf("readdir of the old subdirectory number: %v %v", ents, err)
		}
		f, err := c.OpenFileIno(ctx, file.Ino(), 0)
		if err != nil {
			t.Fatalf("open of the old file number: %v", err)
		}
		got := make([]byte, len(data)+10)
		n, _ := f.ReadAt(got, 0)
		if err := f.Close(); err != nil || !bytes.Equal(got[:n], data) {
			t.Fatalf("read through the old file number: %d bytes, close %v", n, err)
		}
		if _, err := c.MkdirAt(ctx, dir.Ino(), "new", 0o755); err != nil {
			t.Fatalf("mkdir in the old number: %v", err)
		}
		if err := c.RenameAt(ctx, dir.Ino(), "new", dir.Ino(), "renamed", 0); err != nil {
			t.Fatalf("rename within the old number: %v", err)
		}
		if _, err := c.Stat(ctx, where+"/renamed"); err != nil {
			t.Fatalf("%s/renamed: %v", where, err)
		}
		if err := c.RmdirAt(ctx, dir.Ino(), "renamed"); err != nil {
			t.Fatalf("rmdir in the old number: %v", err)
		}
	}
	check("/p2/d/work")
	// Both partitions say how many numbers they forward: the directory,
	// its subdirectory and its file each.
	for _, vp := range []uint16{1, 2} {
		if st, err := c.Status(ctx, vp); err != nil || st.Forwards < 3 {
			t.Fatalf("status of partition %d: %d forwards, %v; want 3 or more", vp, st.Forwards, err)
		}
	}

	// On to the root partition: the old numbers follow two hops.
	if err := c.MkdirAll(ctx, "/top", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/p2/d/work", "/top/work"); err != nil {
		t.Fatal(err)
	}
	check("/top/work")

	// Removed where it is now: the old file number finds nothing.
	if err := c.Remove(ctx, "/top/work/sub/f"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetAttr(ctx, file.Ino()); !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("getattr of a removed node's old number: %v", err)
	}
	f.verify(t)
}

// TestMovedFileLocks: a file renamed to another partition is one file for
// its locks too: a write lock taken by its old number (as a mount that
// opened it before the move holds it) keeps a second client from locking
// it by its new number, and is then released by the old number.
func TestMovedFileLocks(t *testing.T) {
	f := newXFixture(t, Config{})
	ctx := testCtx(t)
	c := f.c
	for _, d := range []string{"/p1/d", "/p2/d"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WriteFile(ctx, "/p1/d/f", []byte("locked"), 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := c.Stat(ctx, "/p1/d/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/p1/d/f", "/p2/d/f"); err != nil {
		t.Fatal(err)
	}
	now, err := c.Stat(ctx, "/p2/d/f")
	if err != nil || now.Ino() == old.Ino() {
		t.Fatalf("after the move: %v, inode %d", err, now.Ino())
	}
	if err := c.SetLk(ctx, old.Ino(), 1, client.Lock{Type: client.WriteLock, End: client.LockEOF}); err != nil {
		t.Fatalf("write lock by the old number: %v", err)
	}
	other := dial(t, f.r.Addr())
	lk := client.Lock{Type: client.WriteLock, End: client.LockEOF}
	if err := other.SetLk(ctx, now.Ino(), 2, lk); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("write lock by the new number while the old one holds it: %v, want EAGAIN", err)
	}
	if err := c.SetLk(ctx, old.Ino(), 1, client.Lock{Type: client.Unlock, End: client.LockEOF}); err != nil {
		t.Fatalf("unlock by the old number: %v", err)
	}
	if err := other.SetLk(ctx, now.Ino(), 2, lk); err != nil {
		t.Fatalf("write lock by the new number once released: %v", err)
	}
}
