package data

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/object"
)

// InlineAdmin is what the flusher needs of one partition: its inline
// slices, and a way to say their objects are stored.
type InlineAdmin interface {
	// ListInline pages through the inline slices, with their bytes, in id
	// order after after.
	ListInline(ctx context.Context, after uint64, limit uint32) (*pb.ListInlineReply, error)
	// InlineStored tells the partition the objects of ids are durable.
	InlineStored(ctx context.Context, ids []uint64) error
	// Partition is the partition spoken for.
	Partition() uint16
}

// FlusherConfig configures a Flusher. Zero fields take the defaults.
type FlusherConfig struct {
	// Interval is how long Run waits after a pass that found nothing to
	// store. Default 50 ms: bytes stay inline about that long.
	Interval  time.Duration
	Uploads   int          // objects put at once; default 16
	BlockSize int          // default layout.BlockSize
	Logger    *slog.Logger // default slog.Default()
}

// Flusher stores the bytes a partition holds inline (small files that
// came with their commits: engine/inline.go) as the objects of their
// slices, with one sync of the object store for all it stored in a pass,
// and then tells the partition, which lets go of the bytes. Run's
// goroutine owns it; Flush may be called directly, but not concurrently.
type Flusher struct {
	store object.Store
	admin InlineAdmin
	cfg   FlusherConfig
}

// NewFlusher returns a flusher of the partition admin speaks for.
func NewFlusher(store object.Store, admin InlineAdmin, cfg FlusherConfig) *Flusher {
	if cfg.Interval <= 0 {
		cfg.Interval = 50 * time.Millisecond
	}
	if cfg.Uploads <= 0 {
		cfg.Uploads = 16
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = (&Config{}).withDefaults().BlockSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Flusher{store: store, admin: admin, cfg: cfg}
}

// listInlinePage is how many inline slices one LIST_INLINE asks for (the
// partition also bounds the bytes of a page).
const listInlinePage = 1000

// Flush stores every inline slice the partition holds now and returns
// how many it stored. Objects are put before the partition is told, and
// synced first, so the partition never forgets bytes whose objects a
// crash could take back.
func (f *Flusher) Flush(ctx context.Context) (int, error) {
	var after uint64
	stored := 0
	for {
		page, err := f.admin.ListInline(ctx, after, listInlinePage)
		if err != nil {
			return stored, fmt.Errorf("flush: list inline: %w", err)
		}
		if len(page.Slices) == 0 {
			return stored, nil
		}
		ids, err := f.put(ctx, page.Slices)
		if err != nil {
			return stored, fmt.Errorf("flush: %w", err)
		}
		if err := object.Sync(ctx, f.store); err != nil {
			return stored, fmt.Errorf("flush: sync: %w", err)
		}
		if err := f.admin.InlineStored(ctx, ids); err != nil {
			return stored, fmt.Errorf("flush: inline stored: %w", err)
		}
		stored += len(ids)
		if page.Eof {
			return stored, nil
		}
		after = ids[len(ids)-1]
	}
}

// put stores the objects of slices, Uploads at a time, and returns their
// ids in order.
func (f *Flusher) put(ctx context.Context, slices []*pb.InlineSlice) ([]uint64, error) {
	ids := make([]uint64, 0, len(slices))
	for _, s := range slices {
		if s == nil || s.Id == 0 || len(s.Data) == 0 {
			return nil, errors.New("list inline: an empty slice")
		}
		ids = append(ids, s.Id)
	}
	sem := make(chan struct{}, f.cfg.Uploads)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, s := range slices {
		for i, key := range SliceKeys(s.Id, len(s.Data), f.cfg.BlockSize) {
			block := s.Data[i*f.cfg.BlockSize : min(len(s.Data), (i+1)*f.cfg.BlockSize)]
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := f.store.Put(ctx, key, block); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("put %s: %w", key, err)
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return ids, first
}

// Run flushes until ctx ends: again at once after a pass that stored
// something, after Interval otherwise. Failures are logged and retried
// after 20 Intervals.
func (f *Flusher) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := f.Flush(ctx)
		if err != nil && ctx.Err() == nil {
			f.cfg.Logger.Warn("inline flusher", "partition", f.admin.Partition(), "err", err)
		}
		wait := f.cfg.Interval
		switch {
		case err != nil:
			wait = 20 * f.cfg.Interval // the partition unreachable, or not its leader: not every 50 ms
		case n > 0:
			wait = 0
		}
		t.Reset(wait)
	}
}
