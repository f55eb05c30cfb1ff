package client_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata"
	"github.com/canopyfs/canopy/internal/data"
	"github.com/canopyfs/canopy/internal/layout"
)

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func TestFSPassesFSTest(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			e := startData(t, b, client.Options{})
			files := map[string][]byte{
				"/tree/a.txt":            []byte("hello\n"),
				"/tree/empty":            nil,
				"/tree/dir/b.bin":        randomBytes(1, 4<<20+17), // two blocks
				"/tree/dir/sub/c":        randomBytes(2, 1000),
				"/tree/dir/sub/deeper/d": []byte("d"),
			}
			for p, content := range files {
				if err := e.c.MkdirAll(e.ctx, p[:len(p)-len(lastElem(p))-1], 0o755); err != nil {
					t.Fatal(err)
				}
				if err := e.c.WriteFile(e.ctx, p, content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.c.MkdirAll(e.ctx, "/tree/emptydir", 0o755); err != nil {
				t.Fatal(err)
			}
			fsys := e.c.FS(e.ctx, "/tree")
			if err := fstest.TestFS(fsys, "a.txt", "empty", "dir/b.bin", "dir/sub/c", "dir/sub/deeper/d", "emptydir"); err != nil {
				t.Fatal(err)
			}
			for p, content := range files {
				got, err := fs.ReadFile(fsys, p[len("/tree/"):])
				if err != nil || !bytes.Equal(got, content) {
					t.Fatalf("%s: %d bytes, %v; want %d bytes", p, len(got), err, len(content))
				}
			}
			if _, err := fsys.Open("../x"); !errors.Is(err, fs.ErrInvalid) {
				t.Fatalf("open ../x: %v, want ErrInvalid", err)
			}
			if _, err := fsys.Open("nope"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("open nope: %v, want ErrNotExist", err)
			}
		})
	}
}

func lastElem(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// A write that crosses chunk boundaries and leaves holes, read back by
// another client after Close.
func TestFileAcrossChunks(t *testing.T) {
	e := startData(t, backends[0], client.Options{})
	f, err := e.c.OpenFile(e.ctx, "/big", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	payload := randomBytes(3, 9<<20)
	at := int64(layout.ChunkSize - 3<<20) // 3 MiB before the boundary, 6 after
	if _, err := f.WriteAt(payload, at); err != nil {
		t.Fatal(err)
	}
	tail := []byte("tail")
	tailAt := int64(2*layout.ChunkSize + 5)
	if _, err := f.WriteAt(tail, tailAt); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := client.Dial(e.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	g, err := other.Open(e.ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	fi, err := g.Stat()
	if err != nil || fi.Size() != tailAt+int64(len(tail)) {
		t.Fatalf("size %v, %v; want %d", fi.Size(), err, tailAt+int64(len(tail)))
	}
	got := make([]byte, len(payload)+2)
	if _, err := g.ReadAt(got, at-1); err != nil {
		t.Fatal(err)
	}
	if got[0] != 0 || got[len(got)-1] != 0 || !bytes.Equal(got[1:len(got)-1], payload) {
		t.Fatal("bytes around the chunk boundary differ")
	}
	hole := make([]byte, 1<<20)
	if _, err := g.ReadAt(hole, layout.ChunkSize+10<<20); err != nil || !bytes.Equal(hole, make([]byte, len(hole))) {
		t.Fatalf("hole: %v, or not zeros", err)
	}
	end := make([]byte, 10)
	n, err := g.ReadAt(end, tailAt)
	if n != len(tail) || err != io.EOF || string(end[:n]) != "tail" {
		t.Fatalf("read at the end: %d %v %q", n, err, end[:n])
	}
	// Sequential reads through the whole file agree with ReadAt.
	h, err := other.Open(e.ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	all, err := io.ReadAll(h)
	if err != nil || int64(len(all)) != fi.Size() || !bytes.Equal(all[at:at+int64(len(payload))], payload) {
		t.Fatalf("ReadAll: %d bytes, %v", len(all), err)
	}
}

func TestFileErrors(t *testing.T) {
	e := startData(t, backends[0], client.Options{})
	if err := e.c.WriteFile(e.ctx, "/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := e.c.Open(e.ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("y")); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("write to a read-only file: %v, want EBADF", err)
	}
	f.Close()
	if _, err := f.Read(make([]byte, 1)); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("read after close: %v, want ErrClosed", err)
	}
	if _, err := e.c.OpenFile(e.ctx, "/f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL on an existing file: %v", err)
	}
	if _, err := e.c.OpenFile(e.ctx, "/", os.O_WRONLY, 0); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("open / for writing: %v, want EISDIR", err)
	}
	// O_APPEND writes at the end; O_TRUNC empties.
	a, err := e.c.OpenFile(e.ctx, "/f", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("yz"))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.c.ReadFile(e.ctx, "/f"); string(got) != "xyz" {
		t.Fatalf("after append: %q", got)
	}
	tr, err := e.c.OpenFile(e.ctx, "/f", os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	if got, err := e.c.ReadFile(e.ctx, "/f"); err != nil || len(got) != 0 {
		t.Fatalf("after O_TRUNC: %q, %v", got, err)
	}
}

// Overwritten and deleted data becomes garbage; the collector deletes its
// objects after the delay and purges the slices; fsck is clean before and
// after.
func TestCollectorRemovesGarbage(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			e := startData(t, b, client.Options{})
			for i, name := range []string{"/keep", "/over", "/gone"} {
				if err := e.c.WriteFile(e.ctx, name, randomBytes(uint64(i), 5<<20), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.c.WriteFile(e.ctx, "/over", []byte("short"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := e.c.Unlink(e.ctx, "/gone"); err != nil {
				t.Fatal(err)
			}
			vol, err := clientdata.Volume(e.ctx, e.c)
			if err != nil {
				t.Fatal(err)
			}
			admin := clientdata.Admin(e.c, 0)
			before := len(e.objects(t))
			rep, err := data.Fsck(e.ctx, e.store, admin, data.FsckOptions{BlockSize: vol.BlockSize})
			if err != nil || !rep.Clean() || rep.Garbage != 2 {
				t.Fatalf("fsck before: %+v, %v; want clean with 2 garbage slices", rep, err)
			}
			// Within the delay nothing goes.
			col := data.NewCollector(e.store, admin, data.CollectorConfig{Delay: time.Hour, BlockSize: vol.BlockSize})
			if st, err := col.Collect(e.ctx); err != nil || st.Slices != 0 {
				t.Fatalf("collect within the delay: %+v, %v", st, err)
			}
			col = data.NewCollector(e.store, admin, data.CollectorConfig{Delay: time.Nanosecond, BlockSize: vol.BlockSize,
				Now: func() time.Time { return time.Now().Add(time.Second) }})
			st, err := col.Collect(e.ctx)
			if err != nil || st.Slices != 2 || st.Objects != 4 {
				t.Fatalf("collect: %+v, %v; want 2 slices, 4 objects", st, err)
			}
			if after := len(e.objects(t)); after != before-4 {
				t.Fatalf("%d objects after collecting, want %d", after, before-4)
			}
			rep, err = data.Fsck(e.ctx, e.store, admin, data.FsckOptions{BlockSize: vol.BlockSize})
			if err != nil || !rep.Clean() || rep.Garbage != 0 {
				t.Fatalf("fsck after: %+v, %v", rep, err)
			}
			if got, err := e.c.ReadFile(e.ctx, "/keep"); err != nil || !bytes.Equal(got, randomBytes(0, 5<<20)) {
				t.Fatalf("/keep after collecting: %v", err)
			}
			if got, err := e.c.ReadFile(e.ctx, "/over"); err != nil || string(got) != "short" {
				t.Fatalf("/over after collecting: %q, %v", got, err)
			}
		})
	}
}

// Many small writes fragment a chunk; compaction rewrites it as one slice
// without changing what it reads, and the old slices become garbage.
func TestCompaction(t *testing.T) {
	e := startData(t, backends[0], client.Options{Data: client.DataOptions{CompactAt: -1}})
	f, err := e.c.OpenFile(e.ctx, "/frag", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	want := randomBytes(4, 64<<10)
	if _, err := f.WriteAt(want, 0); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < 40; i++ {
		off := rng.IntN(len(want) - 1000)
		p := randomBytes(uint64(i), 1+rng.IntN(1000))
		copy(want[off:], p)
		f.WriteAt(p, int64(off))
		if err := f.Sync(); err != nil { // one slice per write
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ino := uint64(f.Ino())
	before, err := e.c.Chunks(e.ctx, f.Ino(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if before[0].StoredSlices < 10 {
		t.Fatalf("only %d stored slices: not fragmented", before[0].StoredSlices)
	}
	vol, err := clientdata.Volume(e.ctx, e.c)
	if err != nil {
		t.Fatal(err)
	}
	done, err := vol.Compact(e.ctx, clientdata.Meta(e.c), ino, 0)
	if err != nil || !done {
		t.Fatalf("compact: %v, %v", done, err)
	}
	after, err := e.c.Chunks(e.ctx, f.Ino(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if after[0].StoredSlices != 1 {
		t.Fatalf("%d stored slices after compaction, want 1", after[0].StoredSlices)
	}
	got, err := e.c.ReadFile(e.ctx, "/frag")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content changed by compaction (%v)", err)
	}
	rep, err := data.Fsck(e.ctx, e.store, clientdata.Admin(e.c, 0), data.FsckOptions{BlockSize: vol.BlockSize})
	if err != nil || !rep.Clean() || rep.Slices != 1 || rep.Garbage != 41 {
		t.Fatalf("fsck after compaction: %+v, %v", rep, err)
	}
}

// A writer that commits many slices to one chunk has it compacted in the
// background, without a reader.
func TestWriterTriggersCompaction(t *testing.T) {
	e := startData(t, backends[0], client.Options{Data: client.DataOptions{CompactAt: 8}})
	f, err := e.c.OpenFile(e.ctx, "/w", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	want := randomBytes(6, 32<<10)
	if _, err := f.WriteAt(want, 0); err != nil {
		t.Fatal(err)
	}
	// The first Sync commits two slices, the next six one each: the
	// eighth reaches CompactAt.
	patchUntilCompacted(t, e, f, want, 7)
}

// patchUntilCompacted overwrites 100 bytes of open file f (whose content
// is want) patches times, syncing after each, closes it, and checks that
// its writer's background compaction left chunk 0 one stored slice with
// the content unchanged.
func patchUntilCompacted(t *testing.T, e *dataEnv, f *client.File, want []byte, patches int) {
	t.Helper()
	for i := range patches {
		p := randomBytes(uint64(100+i), 100)
		copy(want[i*1000:], p)
		f.WriteAt(p, int64(i*1000))
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	vol, err := clientdata.Volume(e.ctx, e.c)
	if err != nil {
		t.Fatal(err)
	}
	vol.Wait() // the background compaction
	r, err := e.c.Chunks(e.ctx, f.Ino(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := r[0].StoredSlices; n != 1 {
		t.Fatalf("%d stored slices after the writer's compaction, want 1", n)
	}
	if got, err := e.c.ReadFile(e.ctx, f.Name()); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("content after compaction: %v", err)
	}
}

// Writes scattered over more chunks than a writer keeps slices open for,
// each chunk then appended to again, read back by another client.
func TestScatteredWritesOverManyChunks(t *testing.T) {
	e := startData(t, backends[0], client.Options{})
	f, err := e.c.OpenFile(e.ctx, "/sparse", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	const chunks = 20
	at := func(i int) int64 { return int64(i)*layout.ChunkSize + 1 + int64(i)*7 }
	for round := 0; round < 2; round++ {
		for i := 0; i < chunks; i++ {
			if _, err := f.WriteAt([]byte{byte('a' + i), byte('A' + round)}, at(i)+int64(2*round)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := client.Dial(e.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	g, err := other.Open(e.ctx, "/sparse")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for i := 0; i < chunks; i++ {
		got := make([]byte, 6)
		want := []byte{0, byte('a' + i), 'A', byte('a' + i), 'B', 0}
		n, err := g.ReadAt(got, at(i)-1)
		if i == chunks-1 {
			want, got = want[:5], got[:n]
		}
		if (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(got, want) {
			t.Fatalf("chunk %d: %q, %v; want %q", i, got, err, want)
		}
	}
}
