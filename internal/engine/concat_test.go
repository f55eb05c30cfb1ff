package engine

import (
	"bytes"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/internal/layout"
)

// readRange materializes bytes [start, end) of ino from its ReadChunks
// views, as a reader would: holes and bytes past the end are zeros.
func (m *dataModel) readRange(ino Ino, start, end uint64) []byte {
	m.t.Helper()
	out := make([]byte, end-start)
	first := uint32(start / layout.ChunkSize)
	a, views, err := m.e.ReadChunks(ino, first, uint32((end-1)/layout.ChunkSize)-first+1)
	if err != nil {
		m.t.Fatal(err)
	}
	for _, v := range views {
		for _, s := range v.Slices {
			lo := chunkStart(v.Chunk) + uint64(s.Pos)
			hi := lo + uint64(s.Len)
			for x := max(lo, start); x < min(hi, end, a.Size); x++ {
				if s.ID != 0 {
					out[x-start] = m.content(s.ID, uint64(s.Off)+x-lo)
				}
			}
		}
	}
	return out
}

// concat appends up to three live files to a new file with Concat, checks
// that every model window of each source reads the same at its place in
// the new file, and makes the new file part of the model. It returns
// false if Concat refused the layout (EINVAL), after checking that
// nothing changed.
func (m *dataModel) concat() bool {
	var srcs []*mfile
	for _, f := range m.files {
		if (!f.gone || f.opens > 0) && len(srcs) < 3 && m.rng.IntN(2) == 0 {
			srcs = append(srcs, f)
		}
	}
	if len(srcs) == 0 {
		return true
	}
	m.newFile()
	dst := m.files[len(m.files)-1]
	inos := make([]Ino, len(srcs))
	for i, f := range srcs {
		inos[i] = f.ino
	}
	before := dumpData(m.e)
	a, err := m.e.Concat(credRoot, dst.ino, inos, m.tick())
	if err == syscall.EINVAL {
		if after := dumpData(m.e); after != before {
			m.t.Fatalf("refused concat changed the data state:\nbefore %s\nafter  %s", before, after)
		}
		return false
	}
	if err != nil {
		m.t.Fatalf("concat %v: %v", inos, err)
	}
	base := uint64(0)
	for _, f := range srcs {
		for w, wb := range modelWindows {
			if wb >= f.size {
				continue
			}
			end := min(wb+modelWin, f.size)
			if got, want := m.readRange(dst.ino, base+wb, base+end), f.win[w][:end-wb]; !bytes.Equal(got, want) {
				m.t.Fatalf("concat: %s window %d reads differently at offset %d of the new file", f.name, w, base)
			}
		}
		base += f.size
	}
	if a.Size != base {
		m.t.Fatalf("concat: size %d, want %d", a.Size, base)
	}
	dst.size = base
	for w := range modelWindows {
		copy(dst.win[w], m.readRange(dst.ino, modelWindows[w], modelWindows[w]+modelWin))
	}
	return true
}

// TestConcatModel runs the data model with concatenations among its
// steps: after each, every file reads as the model says, every slice ever
// committed is used, garbage or purged (a slice two files share becomes
// garbage only when neither uses it), and Check passes, checkpoints
// included.
func TestConcatModel(t *testing.T) {
	steps := 500
	if testing.Short() {
		steps = 120
	}
	for seed := range uint64(3) {
		m := newDataModel(t, seed+100)
		done, refused := 0, 0
		for i := range steps {
			what := "concat"
			if m.rng.IntN(8) == 0 {
				if m.concat() {
					done++
				} else {
					refused++
				}
			} else {
				what = m.step()
			}
			m.verify(i, what)
		}
		if done == 0 {
			t.Fatalf("seed %d: no concat done (%d refused)", seed, refused)
		}
	}
}

// TestConcat covers the cases by hand: slices shared by two files, a
// slice cut at a chunk boundary of the destination, the refusals, and the
// slices becoming garbage only once no file uses them.
func TestConcat(t *testing.T) {
	e, d, f := dataFixture(t)
	g, err := e.Mknod(credU1, d, "g", S_IFREG|0o644, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := e.Mknod(credU1, d, "dst", S_IFREG|0o644, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	// f: 1000 bytes; g: one slice of 1 MiB near the end of its first chunk
	// would not move; make g's slice land across dst's chunk boundary by
	// giving f a size just short of a chunk.
	idF, idG := allocOne(t, e), allocOne(t, e)
	if _, err := e.Commit(credU1, f, []SliceWrite{{Slice: Slice{ID: idF, Size: 1000, Len: 1000}}}, layout.ChunkSize-100, 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Commit(credU1, g.Ino, []SliceWrite{{Slice: Slice{ID: idG, Size: 300, Len: 300}}}, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	_, err = e.Concat(credU1, dst.Ino, []Ino{f, dst.Ino}, 6)
	wantErrno(t, "concat onto a source", err, syscall.EINVAL)
	_, err = e.Concat(credU1, dst.Ino, []Ino{d}, 6)
	wantErrno(t, "concat of a directory", err, syscall.EISDIR)
	_, err = e.Concat(Cred{UID: 5, GID: 5}, dst.Ino, []Ino{f}, 6)
	wantErrno(t, "concat without write permission", err, syscall.EACCES)

	a, err := e.Concat(credU1, dst.Ino, []Ino{f, g.Ino}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != layout.ChunkSize-100+300 || a.Mtime != 7 {
		t.Fatalf("attr after concat: %+v", a)
	}
	got := e.chunks(e.node(dst.Ino))
	want := []chunk{
		{idx: 0, slices: []Slice{{ID: idF, Size: 1000, Len: 1000}, {ID: idG, Size: 300, Len: 100, Pos: layout.ChunkSize - 100}}},
		{idx: 1, slices: []Slice{{ID: idG, Size: 300, Off: 100, Len: 200}}},
	}
	if len(got) != 2 || !slicesEqual(got[0].slices, want[0].slices) || !slicesEqual(got[1].slices, want[1].slices) {
		t.Fatalf("chunks of the concatenation: %+v, want %+v", got, want)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	// g's slice is now used three times (g, and dst's two chunks).
	if e.shared[idG] != 2 || e.shared[idF] != 1 {
		t.Fatalf("extra uses: f %d, g %d", e.shared[idF], e.shared[idG])
	}
	// A second concatenation of g at an offset that brings both of dst's
	// pieces into one chunk is refused.
	dst2, _ := e.Mknod(credU1, d, "dst2", S_IFREG|0o644, 0, 8)
	if _, err := e.Concat(credU1, dst2.Ino, []Ino{dst.Ino}, 9); err != nil {
		t.Fatalf("concat of a concatenation at offset 0: %v", err)
	}
	dst3, _ := e.Mknod(credU1, d, "dst3", S_IFREG|0o644, 0, 8)
	id3 := allocOne(t, e)
	if _, err := e.Commit(credU1, dst3.Ino, []SliceWrite{{Slice: Slice{ID: id3, Size: 10, Len: 10}}}, 0, 0, 9); err != nil {
		t.Fatal(err)
	}
	_, err = e.Concat(credU1, dst3.Ino, []Ino{dst.Ino}, 10)
	wantErrno(t, "concat that puts a slice twice in one chunk", err, syscall.EINVAL)
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}

	// Unlinking the sources frees nothing; unlinking every user of idG does.
	for _, name := range []string{"f", "g", "dst"} {
		if err := e.Unlink(credU1, d, name, 11); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.GarbageLen(); n != 0 {
		t.Fatalf("%d slices garbage while dst2 still uses them", n)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if err := e.Unlink(credU1, d, "dst2", 12); err != nil {
		t.Fatal(err)
	}
	if n := e.GarbageLen(); n != 2 {
		t.Fatalf("%d slices garbage once no file uses them, want 2", n)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func slicesEqual(a, b []Slice) bool {
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
