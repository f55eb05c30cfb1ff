package data

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// recordingMeta hands out slice ids and records commits, per file. Safe
// for concurrent use; mu guards everything.
type recordingMeta struct {
	mu      sync.Mutex
	next    uint64
	commits map[uint64][]*pb.SliceWrite
	size    map[uint64]uint64
}

func newRecordingMeta() *recordingMeta {
	return &recordingMeta{next: 1, commits: map[uint64][]*pb.SliceWrite{}, size: map[uint64]uint64{}}
}

func (m *recordingMeta) AllocSlices(ctx context.Context, ino uint64, count uint32) (uint64, uint32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first := m.next
	m.next += uint64(count)
	return first, count, nil
}

func (m *recordingMeta) Commit(ctx context.Context, ino uint64, writes []*pb.SliceWrite, size uint64) (*pb.Attr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commits[ino] = append(m.commits[ino], writes...)
	m.size[ino] = max(m.size[ino], size)
	return &pb.Attr{Ino: ino, Size: m.size[ino]}, nil
}

func (m *recordingMeta) InlineMax(context.Context, uint64) int { return 0 }

func (m *recordingMeta) ReadChunks(ctx context.Context, ino uint64, chunk, count uint32) (*pb.ReadChunksReply, error) {
	panic("not used")
}

func (m *recordingMeta) Compact(ctx context.Context, ino uint64, chunk uint32, oldIDs []uint64, s *pb.Slice) error {
	panic("not used")
}

// contents rebuilds file ino from its committed slices and the store.
func (m *recordingMeta) contents(t *testing.T, v *Volume, ino uint64) []byte {
	t.Helper()
	m.mu.Lock()
	writes, size := m.commits[ino], m.size[ino]
	m.mu.Unlock()
	out := make([]byte, size)
	for _, w := range writes {
		var slice []byte
		for _, key := range SliceKeys(w.Slice.Id, int(w.Slice.Size), v.BlockSize) {
			r, err := v.Store.Get(t.Context(), key, 0, -1)
			if err != nil {
				t.Fatalf("file %d: %v", ino, err)
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			slice = append(slice, b...)
		}
		copy(out[int(w.Chunk)*v.ChunkSize+int(w.Slice.Pos):], slice[w.Slice.Off:w.Slice.Off+w.Slice.Len])
	}
	return out
}

// fileBytes is the content of test file i.
func fileBytes(i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(k*7 + i*13 + k>>9)
	}
	return b
}

func budgetVolume(t *testing.T, blocks int) *Volume {
	t.Helper()
	v, err := NewVolume(localStore(t), Config{
		ChunkSize: 1 << 20, BlockSize: 64 << 10, Uploads: 2, CompactAt: -1,
		BufferBytes: int64(blocks) * 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// within runs fn and fails the test if it has not returned in a minute
// (a writer waiting for room that never comes).
func within(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("writers still waiting after a minute")
	}
}

// TestWriteBudgetConcurrentFiles writes 16 files at once through writers
// of one Volume whose buffers may hold 4 blocks: the buffers held never
// pass the bound, and every file reads back whole.
func TestWriteBudgetConcurrentFiles(t *testing.T) {
	v := budgetVolume(t, 4)
	meta := newRecordingMeta()
	const files, size, step = 16, 1<<20 + 300<<10, 24 << 10
	errs := make(chan error, files)
	within(t, func() {
		var wg sync.WaitGroup
		for i := range files {
			wg.Go(func() {
				w := v.NewWriter(meta, uint64(i+1), 0)
				data := fileBytes(i, size)
				for off := 0; off < size; off += step {
					if err := w.WriteAt(t.Context(), data[off:min(off+step, size)], int64(off)); err != nil {
						errs <- err
						return
					}
				}
				errs <- w.Flush(t.Context())
			})
		}
		wg.Wait()
	})
	for range files {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	held, peak := v.BufferStats()
	if bound := v.cfg.BufferBytes; peak > bound || held != 0 {
		t.Errorf("buffers: peak %d bytes, %d held after the flushes; bound %d", peak, held, bound)
	}
	for i := range files {
		if got := meta.contents(t, v, uint64(i+1)); !bytes.Equal(got, fileBytes(i, size)) {
			t.Errorf("file %d does not read back (%d bytes)", i, len(got))
		}
	}
}

// TestWriteBudgetIdleHolders has one goroutine write 16 files in turns
// with room for 2 block buffers: the files holding them wait for their
// next write, so the others store their bytes without a buffer rather
// than wait for room that would never come.
func TestWriteBudgetIdleHolders(t *testing.T) {
	v := budgetVolume(t, 2)
	meta := newRecordingMeta()
	const files, size, step = 16, 200 << 10, 10 << 10
	ws := make([]*Writer, files)
	for i := range ws {
		ws[i] = v.NewWriter(meta, uint64(i+1), 0)
	}
	within(t, func() {
		for off := 0; off < size; off += step {
			for i, w := range ws {
				if err := w.WriteAt(t.Context(), fileBytes(i, size)[off:off+step], int64(off)); err != nil {
					t.Error(err)
					return
				}
			}
		}
		for _, w := range ws {
			if err := w.Flush(t.Context()); err != nil {
				t.Error(err)
				return
			}
		}
	})
	held, peak := v.BufferStats()
	if bound := v.cfg.BufferBytes; peak > bound || held != 0 {
		t.Errorf("buffers: peak %d bytes, %d held after the flushes; bound %d", peak, held, bound)
	}
	for i := range files {
		if got := meta.contents(t, v, uint64(i+1)); !bytes.Equal(got, fileBytes(i, size)) {
			t.Errorf("file %d does not read back (%d bytes)", i, len(got))
		}
	}
}
