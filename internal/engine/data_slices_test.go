package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/internal/layout"
)

// A checkpoint whose data section is damaged does not load.
func TestLoadRejectsBadData(t *testing.T) {
	e, _, f := dataFixture(t)
	id := allocOne(t, e)
	if _, err := e.Commit(credRoot, f, []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}}}, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	// Make a slice reach past the file size: Check must refuse it.
	e.st.singleOf(e.node(f)).slice.Pos = 5 // a one-slice file keeps the compact form
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(&buf); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("load of a slice past the end: %v", err)
	}
	// Truncated anywhere in the data section: refused, no panic.
	e.st.singleOf(e.node(f)).slice.Pos = 0
	buf.Reset()
	if err := e.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	for cut := len(full) - 1; cut > len(full)-40 && cut > 0; cut-- {
		if _, err := Load(bytes.NewReader(full[:cut])); err == nil {
			t.Fatalf("load of %d of %d bytes succeeded", cut, len(full))
		}
	}
	if _, err := Load(bytes.NewReader(full)); err != nil {
		t.Fatal(err)
	}
}

// COMPACT names the slices it replaces as a set: their order in the
// request does not matter, but every one must be among the first stored.
func TestCompactIdsInAnyOrder(t *testing.T) {
	e, _, f := dataFixture(t)
	a1, b1, c1 := allocOne(t, e), allocOne(t, e), allocOne(t, e)
	if _, err := e.Commit(credRoot, f, []SliceWrite{
		{Slice: Slice{ID: b1, Size: 100, Len: 100}},
		{Slice: Slice{ID: a1, Size: 100, Len: 100, Pos: 50}},
		{Slice: Slice{ID: c1, Size: 10, Len: 10, Pos: 500}},
	}, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	n := allocOne(t, e)
	wantErrno(t, "compact of the wrong two", e.Compact(f, 0, []uint64{a1, c1}, Slice{ID: n, Size: 150, Len: 150}, 6), syscall.EAGAIN)
	wantErrno(t, "compact naming one id twice", e.Compact(f, 0, []uint64{a1, a1}, Slice{ID: n, Size: 150, Len: 150}, 6), syscall.EAGAIN)
	if err := e.Compact(f, 0, []uint64{a1, b1}, Slice{ID: n, Size: 150, Len: 150}, 6); err != nil {
		t.Fatal(err)
	}
	if got := e.chunks(e.node(f))[0].slices; len(got) != 2 || got[0].ID != n || got[1].ID != c1 {
		t.Fatalf("stored after compaction: %v", got)
	}
}

// ListSlices pages through every slice in use, each once, in id order,
// whatever the page size.
func TestListSlicesPages(t *testing.T) {
	e, d, _ := dataFixture(t)
	var want []uint64
	for i := range 50 {
		f, err := e.Mknod(credRoot, d, fmt.Sprintf("g%d", i), S_IFREG|0o644, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := e.AllocSlices(e.Root(), 3)
		ws := []SliceWrite{
			{Chunk: 0, Slice: Slice{ID: first, Size: 20, Len: 10, Pos: layout.ChunkSize - 10}},
			{Chunk: 1, Slice: Slice{ID: first, Size: 20, Off: 10, Len: 10}}, // one id in two chunks
			{Chunk: 3, Slice: Slice{ID: first + 2, Size: 5, Len: 5}},
		}
		if _, err := e.Commit(credRoot, f.Ino, ws, 0, 0, 6); err != nil {
			t.Fatal(err)
		}
		want = append(want, first, first+2)
	}
	for _, limit := range []int{1, 3, 7, 100, 1000} {
		var got []uint64
		after := uint64(0)
		for {
			page, eof := e.ListSlices(after, limit)
			if len(page) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page))
			}
			for _, r := range page {
				got = append(got, r.ID)
				after = r.ID
			}
			if eof {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: listed %v, want %v", limit, got, want)
		}
	}
}

// A file whose data is one slice, and that has nothing else beside its
// node, keeps that slice in the compact form; it moves to the full form
// and back as slices, truncation and xattrs come and go, and reads the
// same throughout.
func TestOneSliceFormComesAndGoes(t *testing.T) {
	e, _, f := dataFixture(t)
	form := func() string {
		n := e.node(f)
		switch {
		case e.st.singleOf(n) != nil:
			return "single"
		case e.st.extraOf(n) != nil && e.st.extraOf(n).file != nil:
			return "full"
		}
		return "none"
	}
	step := func(what, want string) {
		t.Helper()
		if got := form(); got != want {
			t.Fatalf("after %s: %s form, want %s", what, got, want)
		}
		if err := e.Check(); err != nil {
			t.Fatalf("after %s: %v", what, err)
		}
	}
	step("create", "none")
	a := allocOne(t, e)
	if _, err := e.Commit(credU1, f, []SliceWrite{{Slice: Slice{ID: a, Size: 100, Len: 100}}}, 0, 0, 4); err != nil {
		t.Fatal(err)
	}
	step("one commit", "single")
	b := allocOne(t, e)
	if _, err := e.Commit(credU1, f, []SliceWrite{{Slice: Slice{ID: b, Size: 50, Len: 50, Pos: 80}}}, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	step("a second, overlapping slice", "full")
	if _, err := e.SetAttr(credU1, f, SetAttr{Valid: SetSize, Size: 60}, 6); err != nil {
		t.Fatal(err)
	}
	step("truncate into the first slice", "single")
	if err := e.SetXattr(credU1, f, "user.k", []byte("v"), 0, 7); err != nil {
		t.Fatal(err)
	}
	step("an xattr", "full")
	_, views, err := e.ReadChunks(f, 0, 1)
	if err != nil || len(views) != 1 || len(views[0].Slices) != 1 || views[0].Slices[0].ID != a || views[0].Slices[0].Len != 60 {
		t.Fatalf("read with an xattr: %v %v", views, err)
	}
	if err := e.RemoveXattr(credU1, f, "user.k", 8); err != nil {
		t.Fatal(err)
	}
	step("the xattr removed", "single")
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.st.singleOf(loaded.node(f)) == nil {
		t.Fatal("a one-slice file loads in the full form")
	}
	if _, err := e.SetAttr(credU1, f, SetAttr{Valid: SetSize, Size: 0}, 9); err != nil {
		t.Fatal(err)
	}
	step("truncate to zero", "none")
}

// Load refuses what would make it slow or leave an engine that breaks
// later: a node or an entry name given twice (each repeat would lengthen
// an index run) and an inode allocator past the partition's range; and a
// partition whose inode numbers are used up refuses creates.
func TestLoadRefusesRepeatsAndOverflow(t *testing.T) {
	checkpoint := func(e *Engine) *bytes.Buffer {
		var buf bytes.Buffer
		if err := e.WriteCheckpoint(&buf); err != nil {
			t.Fatal(err)
		}
		return &buf
	}
	e := New(0, 1)
	f, err := e.Mknod(credRoot, e.Root(), "a", 0o644, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	root := e.st.extraOf(e.node(e.Root())).dir
	root.add("a", e.st.slotOf(f.Ino)) // the same name again
	if _, err := Load(checkpoint(e)); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("load of a repeated name: %v", err)
	}
	e = New(0, 1)
	f, _ = e.Mknod(credRoot, e.Root(), "a", 0o644, 0, 2)
	_, dup := e.st.add(f.Ino) // the same inode number again
	dup.Mode = S_IFREG | 0o644
	if _, err := Load(checkpoint(e)); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("load of a repeated inode number: %v", err)
	}
	e = New(0, 1)
	e.next = 1<<localBits + 1
	if _, err := Load(checkpoint(e)); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("load of an allocator past the range: %v", err)
	}
	e.next = 1 << localBits
	l, err := Load(checkpoint(e))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Mknod(credRoot, l.Root(), "f", 0o644, 0, 2); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create with the inode numbers used up: %v", err)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}
