package engine

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/internal/layout"
)

// dataFixture is an engine with a directory /d (0777) and a file /d/f
// (0644) owned by credU1.
func dataFixture(t testing.TB) (*Engine, Ino, Ino) {
	t.Helper()
	e := New(2, 1)
	d, err := e.Mkdir(credRoot, e.Root(), "d", 0o777, 2)
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.Mknod(credU1, d.Ino, "f", S_IFREG|0o644, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	return e, d.Ino, f.Ino
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

func allocOne(t testing.TB, e *Engine) uint64 {
	t.Helper()
	id, n, err := e.AllocSlices(e.Root(), 1)
	if err != nil || n != 1 {
		t.Fatalf("alloc: %d %v", n, err)
	}
	return id
}

func TestAllocSlices(t *testing.T) {
	e, _, _ := dataFixture(t)
	first, n, err := e.AllocSlices(e.Root(), 10)
	if err != nil || n != 10 || Ino(first).Partition() != 2 || localID(first) != 1 {
		t.Fatalf("alloc 10: %d %d %v", first, n, err)
	}
	second, n, err := e.AllocSlices(e.Root(), 1<<20)
	if err != nil || n != MaxAllocSlices || second != first+10 {
		t.Fatalf("alloc 1<<20: %d %d %v, want %d ids from %d", second, n, err, MaxAllocSlices, first+10)
	}
	if next := e.NextSliceID(); next != second+MaxAllocSlices {
		t.Fatalf("next %d, want %d", next, second+MaxAllocSlices)
	}
	_, _, err = e.AllocSlices(e.Root(), 0)
	wantErrno(t, "alloc 0", err, syscall.EINVAL)
	_, _, err = e.AllocSlices(MakeIno(2, 999), 1)
	wantErrno(t, "alloc on a missing node", err, syscall.ENOENT)
}

func TestCommitValidation(t *testing.T) {
	e, d, f := dataFixture(t)
	id := allocOne(t, e)
	ok := Slice{ID: id, Size: 100, Len: 100}
	cases := []struct {
		name string
		c    Cred
		ino  Ino
		ws   []SliceWrite
		size uint64
		want syscall.Errno
	}{
		{"directory", credRoot, d, []SliceWrite{{Slice: ok}}, 0, syscall.EISDIR},
		{"missing", credRoot, MakeIno(2, 999), []SliceWrite{{Slice: ok}}, 0, syscall.ENOENT},
		{"hole id", credRoot, f, []SliceWrite{{Slice: Slice{Size: 1, Len: 1}}}, 0, syscall.EINVAL},
		{"empty slice", credRoot, f, []SliceWrite{{Slice: Slice{ID: id, Size: 1}}}, 0, syscall.EINVAL},
		{"past the slice's data", credRoot, f, []SliceWrite{{Slice: Slice{ID: id, Size: 10, Off: 5, Len: 6}}}, 0, syscall.EINVAL},
		{"past the chunk", credRoot, f, []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10, Pos: layout.ChunkSize - 5}}}, 0, syscall.EINVAL},
		{"never allocated", credRoot, f, []SliceWrite{{Slice: Slice{ID: id + 1, Size: 1, Len: 1}}}, 0, syscall.EINVAL},
		{"other partition", credRoot, f, []SliceWrite{{Slice: Slice{ID: MakeSliceID(3, localID(id)), Size: 1, Len: 1}}}, 0, syscall.EINVAL},
		{"same id twice in a chunk", credRoot, f, []SliceWrite{{Slice: ok}, {Slice: Slice{ID: id, Size: 100, Len: 10, Pos: 200}}}, 0, syscall.EINVAL},
		{"same id, other size", credRoot, f, []SliceWrite{{Slice: ok}, {Chunk: 1, Slice: Slice{ID: id, Size: 99, Len: 10}}}, 0, syscall.EINVAL},
		{"size too big", credRoot, f, nil, MaxFileSize + 1, syscall.EFBIG},
		{"too many slices", credRoot, f, manyWrites(id, MaxCommitWrites+1), 0, syscall.EINVAL},
	}
	before := dumpData(e)
	for _, c := range cases {
		_, err := e.Commit(c.c, c.ino, c.ws, c.size, 0, 10)
		wantErrno(t, c.name, err, c.want)
		if after := dumpData(e); after != before {
			t.Fatalf("%s: a failed commit changed the state:\n%s\n%s", c.name, before, after)
		}
	}
	// The owner may write; the id is then used up.
	a, err := e.Commit(credU1, f, []SliceWrite{{Slice: ok}}, 0, 77, 10)
	if err != nil || a.Size != 100 || a.Mtime != 77 || a.Ctime != 10 {
		t.Fatalf("commit: %+v %v", a, err)
	}
	_, err = e.Commit(credU1, f, []SliceWrite{{Slice: ok}}, 0, 0, 11)
	wantErrno(t, "commit of a used id", err, syscall.EINVAL)
	// A size-only commit extends the file with a hole.
	a, err = e.Commit(credU1, f, nil, 5000, 0, 12)
	if err != nil || a.Size != 5000 || a.Mtime != 12 {
		t.Fatalf("size-only commit: %+v %v", a, err)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

// manyWrites places slice id, one byte, in each of n chunks: valid but
// for its number.
func manyWrites(id uint64, n int) []SliceWrite {
	ws := make([]SliceWrite, n)
	for i := range ws {
		ws[i] = SliceWrite{Chunk: uint32(i), Slice: Slice{ID: id, Size: 1, Len: 1}}
	}
	return ws
}

func TestCommitKillsSetuid(t *testing.T) {
	e, _, f := dataFixture(t)
	if _, err := e.SetAttr(credU1, f, SetAttr{Valid: SetMode, Mode: 0o6775}, 4); err != nil {
		t.Fatal(err)
	}
	a, err := e.Commit(credU1, f, []SliceWrite{{Slice: Slice{ID: allocOne(t, e), Size: 1, Len: 1}}}, 0, 0, 5)
	if err != nil || a.Mode&(S_ISUID|S_ISGID) != 0 {
		t.Fatalf("commit by the owner: mode %o %v, want set-id bits cleared", a.Mode, err)
	}
}

// A size set through a descriptor open for writing (SetOpenFile) needs no
// write permission now: ftruncate on a file whose mode became 0 after the
// open succeeds, by anyone, and a non-root caller still clears the set-id
// bits. Without the flag the mode decides.
func TestTruncateThroughOpenFile(t *testing.T) {
	e, _, f := dataFixture(t)
	if _, err := e.SetAttr(credU1, f, SetAttr{Valid: SetMode, Mode: 0o6070}, 4); err != nil {
		t.Fatal(err)
	}
	_, err := e.SetAttr(credU1, f, SetAttr{Valid: SetSize, Size: 10}, 5)
	wantErrno(t, "truncate by path, mode 6070, as the owner", err, syscall.EACCES)
	_, err = e.SetAttr(credU2, f, SetAttr{Valid: SetSize, Size: 10}, 5)
	wantErrno(t, "truncate by path, mode 6070, as another user", err, syscall.EACCES)
	a, err := e.SetAttr(credU2, f, SetAttr{Valid: SetSize | SetOpenFile, Size: 10}, 6)
	if err != nil || a.Size != 10 || a.Mode&0o7777 != 0o070 {
		t.Fatalf("truncate through an open file by another user: size %d mode %o %v, want 10, 070", a.Size, a.Mode, err)
	}
	_, err = e.SetAttr(credU2, f, SetAttr{Valid: SetMode | SetOpenFile, Mode: 0o777}, 7)
	wantErrno(t, "chmod through an open file by another user", err, syscall.EPERM)
}

// The open that completes a create is granted to the owner whatever the
// new file's mode, and the writes through it commit: open(2) with O_CREAT
// and mode 0 gives a descriptor that can write. Anyone else, and an open
// without OpenCreated, is held to the mode.
func TestOpenCreatedThenCommit(t *testing.T) {
	e, d, _ := dataFixture(t)
	a, err := e.Mknod(credU1, d, "zero", S_IFREG|0, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Open(credU1, a.Ino, OpenReadWrite)
	wantErrno(t, "open of a mode 0 file by its owner", err, syscall.EACCES)
	_, err = e.Open(credU2, a.Ino, OpenReadWrite|OpenCreated)
	wantErrno(t, "open marked as a create by another user", err, syscall.EACCES)
	if _, err := e.Open(credU1, a.Ino, OpenReadWrite|OpenCreated); err != nil {
		t.Fatalf("open completing the owner's create: %v", err)
	}
	got, err := e.Commit(credU1, a.Ino, []SliceWrite{{Slice: Slice{ID: allocOne(t, e), Size: 5, Len: 5}}}, 0, 0, 4)
	if err != nil || got.Size != 5 {
		t.Fatalf("commit through the open file: size %d %v", got.Size, err)
	}
}

func TestReadChunksViews(t *testing.T) {
	e, _, f := dataFixture(t)
	a1, b1 := allocOne(t, e), allocOne(t, e)
	// a1 at [100, 300) of chunk 0; b1 over [200, 250); size extends to
	// chunk 2, leaving chunk 1 a hole.
	_, err := e.Commit(credRoot, f, []SliceWrite{
		{Slice: Slice{ID: a1, Size: 200, Len: 200, Pos: 100}},
		{Slice: Slice{ID: b1, Size: 60, Off: 10, Len: 50, Pos: 200}},
	}, 2*layout.ChunkSize+10, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	a, views, err := e.ReadChunks(f, 0, 0)
	if err != nil || a.Size != 2*layout.ChunkSize+10 || len(views) != 1 {
		t.Fatalf("read chunk 0: %+v %v %v", a, views, err)
	}
	want := []Slice{
		{Len: 100},
		{ID: a1, Size: 200, Off: 0, Len: 100, Pos: 100},
		{ID: b1, Size: 60, Off: 10, Len: 50, Pos: 200},
		{ID: a1, Size: 200, Off: 150, Len: 50, Pos: 250},
		{Pos: 300, Len: layout.ChunkSize - 300},
	}
	if !equalSlices(views[0].Slices, want) || views[0].Stored != 2 {
		t.Fatalf("chunk 0 view %v (stored %d), want %v", views[0].Slices, views[0].Stored, want)
	}
	_, views, _ = e.ReadChunks(f, 1, 10)
	if len(views) != 2 || !equalSlices(views[0].Slices, []Slice{{Len: layout.ChunkSize}}) ||
		!equalSlices(views[1].Slices, []Slice{{Len: 10}}) || views[1].Chunk != 2 {
		t.Fatalf("chunks 1-2: %v", views)
	}
	if _, views, _ = e.ReadChunks(f, 3, 1); len(views) != 0 {
		t.Fatalf("chunk past the end: %v", views)
	}
	_, _, err = e.ReadChunks(e.Root(), 0, 1)
	wantErrno(t, "read chunks of a directory", err, syscall.EISDIR)
}

func equalSlices(a, b []Slice) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOverwriteMakesGarbage(t *testing.T) {
	e, _, f := dataFixture(t)
	a1, b1, c1 := allocOne(t, e), allocOne(t, e), allocOne(t, e)
	commit := func(id uint64, pos, n uint32, now int64) {
		t.Helper()
		if _, err := e.Commit(credRoot, f, []SliceWrite{{Slice: Slice{ID: id, Size: n, Len: n, Pos: pos}}}, 0, 0, now); err != nil {
			t.Fatal(err)
		}
	}
	commit(a1, 0, 100, 10)
	commit(b1, 50, 100, 20) // a1 still shows in [0, 50)
	if g, _ := e.ListGarbage(0, 0, 0); len(g) != 0 {
		t.Fatalf("garbage %v, want none", g)
	}
	commit(c1, 0, 200, 30) // covers both
	g, eof := e.ListGarbage(0, 0, 0)
	if !eof || len(g) != 2 || g[0] != (SliceRef{ID: a1, Size: 100, Freed: 30}) || g[1] != (SliceRef{ID: b1, Size: 100, Freed: 30}) {
		t.Fatalf("garbage %v", g)
	}
	if g, _ := e.ListGarbage(0, 0, 30); len(g) != 0 {
		t.Fatalf("garbage freed before 30: %v", g)
	}
	if g, eof := e.ListGarbage(a1, 1, 31); len(g) != 1 || g[0].ID != b1 || !eof {
		t.Fatalf("garbage after %d: %v %v", a1, g, eof)
	}
	if g, eof := e.ListGarbage(0, 1, 0); len(g) != 1 || eof {
		t.Fatalf("first page of one: %v %v", g, eof)
	}
	e.Purge([]uint64{a1, c1, 12345})
	if g, _ := e.ListGarbage(0, 0, 0); len(g) != 1 || g[0].ID != b1 {
		t.Fatalf("after purge: %v", g)
	}
	if used, _ := e.ListSlices(0, 0); len(used) != 1 || used[0].ID != c1 {
		t.Fatalf("used %v", used)
	}
}

// A slice placed in two chunks (a write across a chunk boundary) stays
// out of the garbage until both uses are gone.
func TestSharedSliceAcrossChunks(t *testing.T) {
	e, d, f := dataFixture(t)
	id := allocOne(t, e)
	ws := []SliceWrite{
		{Chunk: 0, Slice: Slice{ID: id, Size: 200, Off: 0, Len: 100, Pos: layout.ChunkSize - 100}},
		{Chunk: 1, Slice: Slice{ID: id, Size: 200, Off: 100, Len: 100, Pos: 0}},
	}
	if _, err := e.Commit(credRoot, f, ws, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetAttr(credRoot, f, SetAttr{Valid: SetSize, Size: layout.ChunkSize}, 6); err != nil {
		t.Fatal(err)
	}
	if g, _ := e.ListGarbage(0, 0, 0); len(g) != 0 {
		t.Fatalf("garbage %v while chunk 0 still uses the slice", g)
	}
	if used, _ := e.ListSlices(0, 0); len(used) != 1 || used[0] != (SliceRef{ID: id, Size: 200}) {
		t.Fatalf("used %v", used)
	}
	if err := e.Unlink(credRoot, d, "f", 7); err != nil {
		t.Fatal(err)
	}
	if g, _ := e.ListGarbage(0, 0, 0); len(g) != 1 || g[0] != (SliceRef{ID: id, Size: 200, Freed: 7}) {
		t.Fatalf("garbage %v after unlink", g)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTruncateDownUpReadsZeros(t *testing.T) {
	e, _, f := dataFixture(t)
	id := allocOne(t, e)
	if _, err := e.Commit(credRoot, f, []SliceWrite{{Slice: Slice{ID: id, Size: 1000, Len: 1000}}}, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	for _, size := range []uint64{400, 2000} {
		if _, err := e.SetAttr(credRoot, f, SetAttr{Valid: SetSize, Size: size}, 6); err != nil {
			t.Fatal(err)
		}
	}
	_, views, _ := e.ReadChunks(f, 0, 1)
	want := []Slice{{ID: id, Size: 1000, Len: 400}, {Pos: 400, Len: 1600}}
	if len(views) != 1 || !equalSlices(views[0].Slices, want) {
		t.Fatalf("view after truncate down and up: %v, want %v", views, want)
	}
	if _, err := e.SetAttr(credRoot, f, SetAttr{Valid: SetSize, Size: 0}, 7); err != nil {
		t.Fatal(err)
	}
	if g, _ := e.ListGarbage(0, 0, 0); len(g) != 1 || g[0].ID != id || g[0].Freed != 7 {
		t.Fatalf("garbage after truncate to 0: %v", g)
	}
	if len(e.chunks(e.node(f))) != 0 {
		t.Fatalf("chunks left after truncate to 0: %v", e.chunks(e.node(f)))
	}
}

func TestCompact(t *testing.T) {
	e, _, f := dataFixture(t)
	a1, b1 := allocOne(t, e), allocOne(t, e)
	if _, err := e.Commit(credRoot, f, []SliceWrite{
		{Slice: Slice{ID: a1, Size: 100, Len: 100}},
		{Slice: Slice{ID: b1, Size: 100, Len: 100, Pos: 50}},
	}, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	n := allocOne(t, e)
	wantErrno(t, "compact with wrong ids", e.Compact(f, 0, []uint64{b1}, Slice{ID: n, Size: 150, Len: 150}, 6), syscall.EAGAIN)
	wantErrno(t, "compact of a missing chunk", e.Compact(f, 1, []uint64{a1}, Slice{ID: n, Size: 150, Len: 150}, 6), syscall.EAGAIN)
	wantErrno(t, "compact with more ids than stored", e.Compact(f, 0, []uint64{a1, b1, 9}, Slice{ID: n, Size: 150, Len: 150}, 6), syscall.EAGAIN)
	wantErrno(t, "compact to a used id", e.Compact(f, 0, []uint64{a1, b1}, Slice{ID: a1, Size: 150, Len: 150}, 6), syscall.EINVAL)
	wantErrno(t, "compact of nothing", e.Compact(f, 0, nil, Slice{ID: n, Size: 150, Len: 150}, 6), syscall.EINVAL)
	if err := e.Compact(f, 0, []uint64{a1, b1}, Slice{ID: n, Size: 150, Len: 150}, 6); err != nil {
		t.Fatal(err)
	}
	_, views, _ := e.ReadChunks(f, 0, 1)
	if !equalSlices(views[0].Slices, []Slice{{ID: n, Size: 150, Len: 150}}) || views[0].Stored != 1 {
		t.Fatalf("view after compaction: %v", views)
	}
	if g, _ := e.ListGarbage(0, 0, 0); len(g) != 2 {
		t.Fatalf("garbage after compaction: %v", g)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenPermissions(t *testing.T) {
	e, d, f := dataFixture(t)
	other := Cred{UID: 5, GID: 5}
	if _, err := e.Open(other, f, OpenReadOnly); err != nil {
		t.Fatalf("open for reading by another user: %v", err)
	}
	_, err := e.Open(other, f, OpenWriteOnly)
	wantErrno(t, "open for writing by another user", err, syscall.EACCES)
	_, err = e.Open(other, f, OpenReadOnly|OpenTrunc)
	wantErrno(t, "open with O_TRUNC by another user", err, syscall.EACCES)
	_, err = e.Open(credRoot, d, OpenReadWrite)
	wantErrno(t, "open a directory for writing", err, syscall.EISDIR)
	_, err = e.Open(credRoot, f, 3)
	wantErrno(t, "bad access mode", err, syscall.EINVAL)
	if e.Opens(f) != 1 {
		t.Fatalf("opens %d, want 1 (failed opens count nothing)", e.Opens(f))
	}
	wantErrno(t, "close of a file not open", e.Close(d, 5), syscall.EBADF)
}

func TestUnlinkWhileOpen(t *testing.T) {
	e, d, f := dataFixture(t)
	id := allocOne(t, e)
	if _, err := e.Commit(credRoot, f, []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}}}, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.Open(credRoot, f, OpenReadOnly); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Unlink(credRoot, d, "f", 6); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Lookup(credRoot, d, "f"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of the unlinked file: %v", err)
	}
	a, views, err := e.ReadChunks(f, 0, 1)
	if err != nil || a.Nlink != 0 || len(views) != 1 || views[0].Slices[0].ID != id {
		t.Fatalf("open unlinked file: %+v %v %v", a, views, err)
	}
	// An orphan can still be written through the open file.
	if _, err := e.Commit(credRoot, f, nil, 20, 0, 7); err != nil {
		t.Fatal(err)
	}
	_, err = e.Open(credRoot, f, OpenReadOnly)
	wantErrno(t, "open of an orphan", err, syscall.ENOENT)
	_, err = e.Link(credRoot, f, d, "again", 7)
	wantErrno(t, "link of an orphan", err, syscall.ENOENT)
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if e.Statfs().UsedBytes != 20 {
		t.Fatalf("used %d, want the orphan's 20 bytes", e.Statfs().UsedBytes)
	}
	if err := e.Close(f, 8); err != nil {
		t.Fatal(err)
	}
	if g, _ := e.ListGarbage(0, 0, 0); len(g) != 0 {
		t.Fatalf("garbage %v while still open once", g)
	}
	if err := e.Close(f, 9); err != nil {
		t.Fatal(err)
	}
	if g, _ := e.ListGarbage(0, 0, 0); len(g) != 1 || g[0].Freed != 9 {
		t.Fatalf("garbage %v after the last close", g)
	}
	if _, err := e.GetAttr(f); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("getattr after the last close: %v", err)
	}
	if e.Statfs().UsedBytes != 0 || e.Orphans() != 0 {
		t.Fatalf("used %d, orphans %d after the last close", e.Statfs().UsedBytes, e.Orphans())
	}
}

// An open file's orphan survives a checkpoint; loading it and releasing
// orphans (what recovery does) frees it, since nobody has it open then.
func TestOrphanCheckpointAndRelease(t *testing.T) {
	e, d, f := dataFixture(t)
	id := allocOne(t, e)
	if _, err := e.Commit(credRoot, f, []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}}}, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Open(credRoot, f, OpenReadOnly); err != nil {
		t.Fatal(err)
	}
	if err := e.Unlink(credRoot, d, "f", 6); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	l, err := Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if l.Orphans() != 1 || l.Opens(f) != 0 {
		t.Fatalf("loaded: %d orphans, %d opens", l.Orphans(), l.Opens(f))
	}
	l.HoldOrphans(true)
	// While held, a file whose last link goes stays too.
	g, err := l.Mknod(credRoot, d, "g", S_IFREG|0o644, 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlink(credRoot, d, "g", 8); err != nil {
		t.Fatal(err)
	}
	if l.Orphans() != 2 {
		t.Fatalf("%d orphans while held, want 2", l.Orphans())
	}
	l.ReleaseOrphans(9)
	if l.Orphans() != 0 || l.Len() != 2 {
		t.Fatalf("after release: %d orphans, %d nodes", l.Orphans(), l.Len())
	}
	if _, err := l.GetAttr(g.Ino); err == nil {
		t.Fatal("held orphan not freed")
	}
	if gar, _ := l.ListGarbage(0, 0, 0); len(gar) != 1 || gar[0] != (SliceRef{ID: id, Size: 10, Freed: 9}) {
		t.Fatalf("garbage %v", gar)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestRenameOverFreesData(t *testing.T) {
	e, d, f := dataFixture(t)
	id := allocOne(t, e)
	if _, err := e.Commit(credRoot, f, []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}}}, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Mknod(credRoot, d, "g", S_IFREG|0o644, 0, 6); err != nil {
		t.Fatal(err)
	}
	if err := e.Rename(credRoot, d, "g", d, "f", 0, 7); err != nil {
		t.Fatal(err)
	}
	if g, _ := e.ListGarbage(0, 0, 0); len(g) != 1 || g[0].ID != id || g[0].Freed != 7 {
		t.Fatalf("garbage after rename over: %v", g)
	}
}
