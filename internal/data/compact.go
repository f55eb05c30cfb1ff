package data

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"syscall"
	"time"

	"github.com/canopyfs/canopy/internal/object"
)

// chunkRef names one chunk of one file.
type chunkRef struct {
	ino   uint64
	chunk uint32
}

// compactTimeout bounds one background compaction.
const compactTimeout = 5 * time.Minute

// compactLater compacts the chunk on a goroutine of its own unless a
// compaction of it is already running.
func (v *Volume) compactLater(meta Meta, ino uint64, chunk uint32) {
	ref := chunkRef{ino, chunk}
	if _, busy := v.compacting.LoadOrStore(ref, struct{}{}); busy {
		return
	}
	v.bg.Go(func() {
		defer v.compacting.Delete(ref)
		ctx, cancel := context.WithTimeout(context.Background(), compactTimeout)
		defer cancel()
		if _, err := v.Compact(ctx, meta, ino, chunk); err != nil {
			slog.Debug("compaction", "ino", ino, "chunk", chunk, "err", err)
		}
	})
}

// Compact rewrites chunk of file ino as one slice: it reads what the
// chunk's stored slices show, stores it as a new slice and asks the
// metadata service to put it in their place (COMPACT). If the chunk
// changed in between (EAGAIN), the new slice's objects are deleted and
// compacted is false with no error. A chunk of fewer than two slices, or
// whose range is mostly holes, is left alone.
func (v *Volume) Compact(ctx context.Context, meta Meta, ino uint64, chunk uint32) (compacted bool, err error) {
	reply, err := meta.ReadChunks(ctx, ino, chunk, 1)
	if err != nil {
		return false, fmt.Errorf("compact: %w", err)
	}
	if len(reply.Chunks) == 0 || reply.Chunks[0].Chunk != chunk {
		return false, nil
	}
	cv := reply.Chunks[0]
	if err := checkView(cv, v.ChunkSize); err != nil {
		return false, fmt.Errorf("compact: %w", err)
	}
	// The stored slices, in the order they were placed: every stored slice
	// shows somewhere (covered ones are dropped), and slices placed later
	// have larger ids unless two writers raced, which COMPACT detects.
	var ids []uint64
	start, end := -1, 0
	for _, s := range cv.Slices {
		if s.Id == 0 {
			continue
		}
		if !slices.Contains(ids, s.Id) {
			ids = append(ids, s.Id)
		}
		if start < 0 {
			start = int(s.Pos)
		}
		end = int(s.Pos + s.Len)
	}
	if len(ids) < 2 || len(ids) != int(cv.StoredSlices) {
		return false, nil
	}
	// One slice spans the whole range, holes included, so a chunk whose
	// data is mostly holes is left fragmented rather than filled with
	// zeros.
	holes := 0
	for _, s := range cv.Slices {
		if s.Id == 0 && int(s.Pos) > start && int(s.Pos) < end {
			holes += int(s.Len)
		}
	}
	if holes > (end-start)/2 {
		return false, nil
	}
	slices.Sort(ids)

	buf := make([]byte, end-start)
	r := &Reader{v: v, meta: meta, ino: ino, inline: map[uint64][]byte{}}
	for _, s := range reply.Inline { // slices whose bytes the partition still holds
		if s != nil && s.Id != 0 {
			r.inline[s.Id] = s.Data
		}
	}
	err = r.readChunk(ctx, cv, start, buf)
	r.Release()
	if err != nil {
		return false, fmt.Errorf("compact: %w", err)
	}
	id, err := v.ids.alloc(ctx, meta, ino)
	if err != nil {
		return false, fmt.Errorf("compact: %w", err)
	}
	keys, err := v.putSlice(ctx, id, buf)
	if err != nil {
		v.deleteKeys(keys)
		return false, fmt.Errorf("compact: %w", err)
	}
	s := sliceOf(id, start, len(buf))
	if err := meta.Compact(ctx, ino, chunk, ids, s); err != nil {
		v.deleteKeys(keys)
		if errors.Is(err, syscall.EAGAIN) {
			return false, nil
		}
		return false, fmt.Errorf("compact: %w", err)
	}
	return true, nil
}

// putSlice stores data as the blocks of slice id, concurrently within the
// Volume's upload bound, and returns the keys it stored.
func (v *Volume) putSlice(ctx context.Context, id uint64, data []byte) ([]string, error) {
	keys := SliceKeys(id, len(data), v.BlockSize)
	errs := make([]error, len(keys))
	done := make(chan struct{}, len(keys))
	for i, key := range keys {
		v.uploads <- struct{}{}
		go func() {
			defer func() { <-v.uploads; done <- struct{}{} }()
			b := data[i*v.BlockSize : min(len(data), (i+1)*v.BlockSize)]
			errs[i] = v.Store.Put(ctx, key, b)
		}()
	}
	for range keys {
		<-done
	}
	if err := errors.Join(errs...); err != nil {
		return keys, err
	}
	return keys, object.Sync(ctx, v.Store)
}

// deleteKeys removes objects that no slice will name, best effort: what is
// left behind the orphan sweep finds.
func (v *Volume) deleteKeys(keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, k := range keys {
		v.Store.Delete(ctx, k)
	}
}
