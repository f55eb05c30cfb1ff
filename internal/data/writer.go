package data

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	pb "github.com/canopyfs/canopy/api/metapb"

	"github.com/canopyfs/canopy/internal/object"
)

// Writer buffers the writes of one open file into slices, uploads each
// slice's blocks as they fill (at most Config.Uploads at a time per
// Volume), and commits the finished slices on Flush. The open file's
// goroutine owns it: calls must not overlap. Upload goroutines touch only
// their own slice's error, under that slice's lock.
type Writer struct {
	v    *Volume
	meta Meta
	ino  uint64
	size uint64 // the file's length as far as this writer knows

	slices []*sliceBuf          // in the order they were started, not yet committed
	open   map[uint32]*sliceBuf // per chunk, the slice that may still grow
	done   int                  // finished slices in slices

	// committed counts slices committed per chunk since the chunk was last
	// handed to compaction.
	committed map[uint32]int
}

// maxOpenSlices is the most slices a writer keeps open to appends, one per
// chunk.
const maxOpenSlices = 8

// sliceBuf is one slice being written: bytes at chunk offset pos, stored
// as slice id. cur holds the bytes of the block not yet uploaded.
type sliceBuf struct {
	chunk  uint32
	pos    int
	id     uint64
	length int
	cur    []byte // pooled; nil when empty
	open   bool

	wg  sync.WaitGroup // uploads in flight
	mu  sync.Mutex
	err error // first upload failure; guarded by mu
}

// NewWriter returns a writer for file ino, whose length is size, that
// commits through meta.
func (v *Volume) NewWriter(meta Meta, ino uint64, size uint64) *Writer {
	return &Writer{v: v, meta: meta, ino: ino, size: size, open: map[uint32]*sliceBuf{}, committed: map[uint32]int{}}
}

// Size is the file's length including buffered writes.
func (w *Writer) Size() uint64 { return w.size }

// SetSize records a length the file was given outside the writer
// (a truncate, after Flush).
func (w *Writer) SetSize(n uint64) { w.size = n }

// Dirty reports whether there are writes not yet committed.
func (w *Writer) Dirty() bool { return len(w.slices) > 0 }

// WriteAt buffers p at file offset off.
func (w *Writer) WriteAt(ctx context.Context, p []byte, off int64) error {
	if off < 0 {
		return errors.New("negative offset")
	}
	cs := int64(w.v.ChunkSize)
	if off > cs<<32-int64(len(p)) {
		return syscall.EFBIG // chunk indexes are 32 bits
	}
	for len(p) > 0 {
		chunk, pos := uint32(off/cs), int(off%cs)
		n := min(len(p), int(cs)-pos)
		if err := w.writeChunk(ctx, chunk, pos, p[:n]); err != nil {
			return err
		}
		p, off = p[n:], off+int64(n)
		w.size = max(w.size, uint64(off))
	}
	if w.done >= w.v.cfg.CommitAfter {
		return w.Flush(ctx)
	}
	return nil
}

// writeChunk appends p at pos of chunk to the chunk's open slice if it
// ends at pos, or else starts a new slice.
func (w *Writer) writeChunk(ctx context.Context, chunk uint32, pos int, p []byte) error {
	s := w.open[chunk]
	if s == nil || s.pos+s.length != pos {
		if s != nil {
			if err := w.finish(ctx, s); err != nil {
				return err
			}
		}
		// Each open slice holds a block buffer: bound them, so that
		// writes scattered over many chunks do not hold a block each.
		if len(w.open) >= maxOpenSlices {
			for _, old := range w.open {
				if err := w.finish(ctx, old); err != nil {
					return err
				}
				break
			}
		}
		id, err := w.v.ids.alloc(ctx, w.meta, w.ino)
		if err != nil {
			return err
		}
		s = &sliceBuf{chunk: chunk, pos: pos, id: id, open: true}
		w.open[chunk] = s
		w.slices = append(w.slices, s)
	}
	bs := w.v.BlockSize
	for len(p) > 0 {
		if s.cur == nil {
			if !w.takeBuffer(ctx, s) {
				n, err := w.writeDirect(ctx, s, p)
				if err != nil {
					return err
				}
				p, pos = p[n:], pos+n
				if !s.open && len(p) > 0 {
					return w.writeChunk(ctx, chunk, pos, p)
				}
				continue
			}
			s.cur = w.v.pool.get(bs)[:0]
		}
		n := min(len(p), bs-len(s.cur))
		s.cur = append(s.cur, p[:n]...)
		s.length += n
		p, pos = p[n:], pos+n
		if len(s.cur) == bs {
			if err := w.upload(ctx, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// takeBuffer takes a block buffer's room from the Volume's write budget
// for slice s. Where there is none and no upload is in flight to free
// some, it uploads the partly filled blocks of this writer's other open
// slices and tries again; false means the budget is held by other
// writers' partly filled blocks, and s must be written without a buffer.
func (w *Writer) takeBuffer(ctx context.Context, s *sliceBuf) bool {
	bs := int64(w.v.BlockSize)
	for {
		if w.v.budget.acquire(bs) {
			return true
		}
		freed := false
		for _, o := range w.open {
			if o != s && o.cur != nil {
				if err := w.finish(ctx, o); err != nil {
					return false
				}
				freed = true
			}
		}
		if !freed {
			return false
		}
	}
}

// writeDirect stores up to a block of p as the next block of slice s
// straight from p, waiting for its upload, when the write budget has no
// room for a buffer. A block shorter than BlockSize ends the slice (an
// object is never appended to), so the rest goes to a new one. It returns
// how many bytes of p it stored.
func (w *Writer) writeDirect(ctx context.Context, s *sliceBuf, p []byte) (int, error) {
	bs := w.v.BlockSize
	n := min(len(p), bs)
	key := blockKey(s.id, s.length/bs, n)
	select {
	case w.v.uploads <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	err := w.v.Store.Put(ctx, key, p[:n])
	<-w.v.uploads
	if err != nil {
		err = fmt.Errorf("upload %s: %w", key, err)
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
		return 0, err
	}
	s.length += n
	if n < bs {
		s.open = false
		if w.open[s.chunk] == s {
			delete(w.open, s.chunk)
		}
		w.done++
	}
	return n, nil
}

// upload sends the slice's current block, waiting for a free upload slot.
func (w *Writer) upload(ctx context.Context, s *sliceBuf) error {
	buf := s.cur
	s.cur = nil
	if buf == nil {
		return nil
	}
	bs := int64(w.v.BlockSize)
	if len(buf) == 0 {
		w.v.pool.put(buf)
		w.v.budget.release(bs, false)
		return nil
	}
	index := (s.length - len(buf)) / w.v.BlockSize
	key := blockKey(s.id, index, len(buf))
	select {
	case w.v.uploads <- struct{}{}:
	case <-ctx.Done():
		w.v.pool.put(buf)
		w.v.budget.release(bs, false)
		return ctx.Err()
	}
	w.v.budget.uploadStarted()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := w.v.Store.Put(context.WithoutCancel(ctx), key, buf)
		<-w.v.uploads
		w.v.pool.put(buf)
		w.v.budget.release(bs, true)
		if err != nil {
			s.mu.Lock()
			if s.err == nil {
				s.err = fmt.Errorf("upload %s: %w", key, err)
			}
			s.mu.Unlock()
		}
	}()
	return nil
}

// finish uploads what the slice still buffers and closes it to appends.
func (w *Writer) finish(ctx context.Context, s *sliceBuf) error {
	if !s.open {
		return nil
	}
	s.open = false
	if w.open[s.chunk] == s {
		delete(w.open, s.chunk)
	}
	w.done++
	return w.upload(ctx, s)
}

// Flush uploads everything buffered, waits for the uploads and commits the
// slices in the order they were written. After it returns without error,
// every client reading the file sees the writes.
func (w *Writer) Flush(ctx context.Context) error {
	_, err := w.FlushSetAttr(ctx, nil)
	return err
}

// FlushSetAttr is Flush that also applies attrs (mode, owner and times,
// when not nil) in the same change as its last commit, or alone in a
// commit of no writes when nothing is buffered. It reports whether attrs
// was applied: false, with a nil error, when the partition could not take
// it with the commit (see AttrCommitter) and the writes were committed
// without it; the caller then sets the attributes itself.
func (w *Writer) FlushSetAttr(ctx context.Context, attrs *pb.SetattrRequest) (applied bool, err error) {
	if len(w.slices) == 0 {
		if attrs == nil {
			return false, nil
		}
		return w.commit(ctx, nil, 0, attrs)
	}
	if done, applied, err := w.flushInline(ctx, attrs); done {
		return applied, err
	}
	for _, s := range w.slices {
		if e := w.finish(ctx, s); e != nil && err == nil {
			err = e
		}
	}
	for _, s := range w.slices {
		s.wg.Wait()
		s.mu.Lock()
		if s.err != nil && err == nil {
			err = s.err
		}
		s.mu.Unlock()
	}
	if err == nil && len(w.slices) > 0 {
		// Data before metadata: the objects must survive a crash of the
		// machine before any commit names them.
		if e := object.Sync(ctx, w.v.Store); e != nil {
			err = fmt.Errorf("sync uploads: %w", e)
		}
	}
	if err != nil {
		// The writes are lost: drop them, so that a retry does not commit
		// slices with missing objects. Their uploaded objects are orphans
		// for the collector.
		w.slices, w.done = nil, 0
		return false, err
	}
	const perCommit = 1024
	writes := make([]*pb.SliceWrite, 0, min(len(w.slices), perCommit))
	for i, s := range w.slices {
		writes = append(writes, &pb.SliceWrite{Chunk: s.chunk, Slice: &pb.Slice{
			Id: s.id, Size: uint32(s.length), Len: uint32(s.length), Pos: uint32(s.pos),
		}})
		last := i == len(w.slices)-1
		if len(writes) == perCommit || last {
			var with *pb.SetattrRequest
			if last {
				with = attrs
			}
			if applied, err = w.commit(ctx, writes, w.size, with); err != nil {
				w.slices, w.done = w.slices[i+1-len(writes):], 0
				return false, fmt.Errorf("commit: %w", err)
			}
			writes = writes[:0]
		}
	}
	// A chunk this writer has placed many slices in is fragmented:
	// compact it in the background.
	for _, s := range w.slices {
		w.committed[s.chunk]++
		if at := w.v.cfg.CompactAt; at > 0 && w.committed[s.chunk] >= at {
			w.committed[s.chunk] = 0
			w.v.compactLater(w.meta, w.ino, s.chunk)
		}
	}
	w.slices, w.done = nil, 0
	return applied, nil
}

// commit sends one commit, with attrs (if not nil) in the same change
// where the partition takes it; it reports whether attrs went with it.
func (w *Writer) commit(ctx context.Context, writes []*pb.SliceWrite, size uint64, attrs *pb.SetattrRequest) (bool, error) {
	if ac, ok := w.meta.(AttrCommitter); ok && attrs != nil {
		_, err := ac.CommitSetAttr(ctx, w.ino, writes, size, attrs)
		if !errors.Is(err, ErrSetAttrApart) {
			return err == nil, err
		}
	}
	if len(writes) == 0 && size == 0 {
		return false, nil // attrs alone, and they must go apart
	}
	_, err := w.meta.Commit(ctx, w.ino, writes, size)
	return false, err
}

// flushInline commits the file's whole content with its bytes inline
// when it is one small slice from the file's start of which nothing is
// uploaded yet, and the partition takes such slices (engine/inline.go):
// no object is stored and nothing waits for the object store; the
// partition's flusher stores the objects later. It reports whether it
// did (or failed for good: err); false leaves the slice to the ordinary
// path, also when the partition has no room for inline bytes now
// (ENOBUFS) or the file turned out longer (EINVAL). applied says whether
// attrs went with the commit (FlushSetAttr).
func (w *Writer) flushInline(ctx context.Context, attrs *pb.SetattrRequest) (done, applied bool, err error) {
	if w.v.cfg.NoInline || len(w.slices) != 1 {
		return false, false, nil
	}
	s := w.slices[0]
	n := s.length
	if s.chunk != 0 || s.pos != 0 || n == 0 || len(s.cur) != n || uint64(n) != w.size {
		return false, false, nil
	}
	if n > w.meta.InlineMax(ctx, w.ino) {
		return false, false, nil
	}
	write := &pb.SliceWrite{Slice: &pb.Slice{Id: s.id, Size: uint32(n), Len: uint32(n)}, Data: s.cur}
	if applied, err = w.commit(ctx, []*pb.SliceWrite{write}, w.size, attrs); err != nil {
		if errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EINVAL) {
			return false, false, nil
		}
		return true, false, fmt.Errorf("commit: %w", err) // the slice stays, for a retry
	}
	w.v.pool.put(s.cur)
	w.v.budget.release(int64(w.v.BlockSize), false)
	s.cur, s.open = nil, false
	if w.open[s.chunk] == s {
		delete(w.open, s.chunk)
	}
	w.slices, w.done = nil, 0
	return true, applied, nil
}

// Abort drops buffered writes without committing them, after their
// uploads end.
func (w *Writer) Abort() {
	for _, s := range w.slices {
		if s.cur != nil {
			w.v.pool.put(s.cur)
			w.v.budget.release(int64(w.v.BlockSize), false)
			s.cur = nil
		}
		s.wg.Wait()
	}
	w.slices, w.done = nil, 0
	clear(w.open)
}
