package data

import (
	"context"
	"fmt"
	"math"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// viewBatch is how many chunk views one READ_CHUNKS asks for.
const viewBatch = 4

// Reader reads one open file: it fetches chunk views from the metadata
// service, keeps them until Invalidate, reads blocks through the Volume's
// cache, and reads ahead while access is sequential. The open file's
// goroutine owns it: calls must not overlap.
type Reader struct {
	v    *Volume
	meta Meta
	ino  uint64

	size    uint64 // from the last READ_CHUNKS
	known   bool   // size and views are loaded
	views   map[uint32]*pb.ChunkView
	inline  map[uint64][]byte // bytes of inline slices the views name (not objects yet)
	next    int64             // where the last read ended
	ahead   int               // current readahead window, bytes
	aheadTo int64             // readahead has been started up to here

	// The block the last read ended in, kept referenced so that small
	// sequential reads do not go through the cache each time.
	held        blockRef
	heldData    []byte
	heldRelease func()
	pieces      []piece // scratch for plan
}

// NewReader returns a reader for file ino that asks meta for its chunks.
func (v *Volume) NewReader(meta Meta, ino uint64) *Reader {
	return &Reader{v: v, meta: meta, ino: ino, views: map[uint32]*pb.ChunkView{}, inline: map[uint64][]byte{}}
}

// Invalidate forgets the file's size and chunk views (after the file was
// written or truncated).
func (r *Reader) Invalidate() {
	r.Release()
	r.known = false
	clear(r.views)
	clear(r.inline)
	r.aheadTo = 0
}

// Size returns the file's length as of the views held.
func (r *Reader) Size(ctx context.Context) (uint64, error) {
	if !r.known {
		if _, err := r.view(ctx, 0); err != nil {
			return 0, err
		}
	}
	return r.size, nil
}

// view returns chunk's view, asking for it and the next ones if needed.
func (r *Reader) view(ctx context.Context, chunk uint32) (*pb.ChunkView, error) {
	if v, ok := r.views[chunk]; ok && r.known {
		return v, nil
	}
	reply, err := r.meta.ReadChunks(ctx, r.ino, chunk, viewBatch)
	if err != nil {
		return nil, err
	}
	if reply.Attr == nil {
		return nil, fmt.Errorf("read chunks: reply without attributes")
	}
	if !r.known {
		clear(r.views)
		clear(r.inline)
	}
	for _, s := range reply.Inline {
		if s != nil && s.Id != 0 {
			r.inline[s.Id] = s.Data
		}
	}
	r.known = true
	r.size = reply.Attr.Size
	end := uint64(chunk) + viewBatch
	for _, cv := range reply.Chunks {
		if cv == nil || cv.Chunk < chunk || uint64(cv.Chunk) >= end {
			return nil, fmt.Errorf("read chunks: unexpected chunk in reply")
		}
		if err := checkView(cv, r.v.ChunkSize); err != nil {
			return nil, fmt.Errorf("read chunks: %w", err)
		}
		r.views[cv.Chunk] = cv
	}
	for c := uint64(chunk); c < end && c <= math.MaxUint32; c++ {
		if _, ok := r.views[uint32(c)]; !ok {
			r.views[uint32(c)] = &pb.ChunkView{Chunk: uint32(c)} // nothing stored: zeros
		}
	}
	return r.views[chunk], nil
}

// ReadAt reads up to len(p) bytes at off; it returns fewer only at the end
// of the file (n < len(p) with eof true).
func (r *Reader) ReadAt(ctx context.Context, p []byte, off int64) (n int, eof bool, err error) {
	size, err := r.Size(ctx)
	if err != nil {
		return 0, false, err
	}
	if off >= int64(size) {
		return 0, true, nil
	}
	want := min(int64(len(p)), int64(size)-off)
	sequential := off == r.next
	cs := int64(r.v.ChunkSize)
	for int64(n) < want {
		at := off + int64(n)
		chunk, pos := uint32(at/cs), int(at%cs)
		m := int(min(want-int64(n), cs-int64(pos)))
		cv, err := r.view(ctx, chunk)
		if err != nil {
			return n, false, err
		}
		if r.v.cfg.CompactAt > 0 && int(cv.StoredSlices) >= r.v.cfg.CompactAt {
			r.v.compactLater(r.meta, r.ino, cv.Chunk)
		}
		if err := r.readChunk(ctx, cv, pos, p[n:n+m]); err != nil {
			return n, false, err
		}
		n += m
	}
	r.next = off + int64(n)
	r.readahead(ctx, sequential)
	return n, int64(n) < int64(len(p)), nil
}

// readChunk fills p with the chunk's bytes from pos.
func (r *Reader) readChunk(ctx context.Context, cv *pb.ChunkView, pos int, p []byte) error {
	r.pieces = plan(r.pieces[:0], cv.Slices, pos, len(p))
	for _, pc := range r.pieces {
		dst := p[pc.pos-pos : pc.pos-pos+pc.n]
		if pc.id == 0 {
			clear(dst)
			continue
		}
		if err := r.readSlice(ctx, pc.id, pc.size, pc.soff, dst); err != nil {
			return err
		}
	}
	return nil
}

// Release lets go of the block the reader holds.
func (r *Reader) Release() {
	if r.heldRelease != nil {
		r.heldRelease()
		r.heldData, r.heldRelease, r.held = nil, nil, blockRef{}
	}
}

// readSlice fills dst with the bytes of slice id (size bytes) from soff.
func (r *Reader) readSlice(ctx context.Context, id uint64, size, soff int, dst []byte) error {
	if data, ok := r.inline[id]; ok {
		if len(data) != size || soff+len(dst) > len(data) {
			return fmt.Errorf("inline slice %d: %d bytes for a slice of %d read at %d: %w", id, len(data), size, soff, ErrCorrupt)
		}
		copy(dst, data[soff:])
		return nil
	}
	bs := r.v.BlockSize
	for len(dst) > 0 {
		index := soff / bs
		in := soff % bs
		ref := blockRef{id: id, index: index, size: r.v.blockLen(size, index)}
		if ref.size <= in {
			return fmt.Errorf("slice %d: offset %d past its %d bytes: %w", id, soff, size, ErrCorrupt)
		}
		if r.heldRelease == nil || r.held != ref {
			data, release, err := r.v.cache.get(ctx, ref)
			if err != nil {
				return err
			}
			r.Release()
			r.held, r.heldData, r.heldRelease = ref, data, release
		}
		k := copy(dst, r.heldData[in:])
		dst, soff = dst[k:], soff+k
	}
	return nil
}

// readahead starts downloads of the blocks after the last read while reads
// are sequential, doubling the window up to Config.Readahead.
func (r *Reader) readahead(ctx context.Context, sequential bool) {
	if !sequential {
		r.ahead = 0
		return
	}
	r.ahead = min(max(2*r.ahead, r.v.BlockSize), r.v.cfg.Readahead)
	from := max(r.next, r.aheadTo)
	to := min(r.next+int64(r.ahead), int64(r.size))
	cs := int64(r.v.ChunkSize)
	for at := from; at < to; {
		chunk, pos := uint32(at/cs), int(at%cs)
		m := int(min(to-at, cs-int64(pos)))
		cv, err := r.view(ctx, chunk)
		if err != nil {
			return
		}
		r.pieces = plan(r.pieces[:0], cv.Slices, pos, m)
		for _, pc := range r.pieces {
			if _, inline := r.inline[pc.id]; pc.id == 0 || inline {
				continue
			}
			for b := pc.soff / r.v.BlockSize; b*r.v.BlockSize < pc.soff+pc.n; b++ {
				r.v.cache.prefetch(blockRef{id: pc.id, index: b, size: r.v.blockLen(pc.size, b)})
			}
		}
		at += int64(m)
	}
	r.aheadTo = max(r.aheadTo, to)
}
