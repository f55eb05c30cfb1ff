package data

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/protocol"
)

// CollectorConfig configures a Collector. Zero fields take the defaults.
type CollectorConfig struct {
	// Delay is how long the objects of a freed slice are kept before they
	// are deleted (readers that fetched a chunk view just before the slice
	// was freed may still read them). Default 10 minutes.
	Delay time.Duration
	// Grace is how old an object must be before the orphan sweep may
	// delete it when no slice names it: a writer uploads blocks before it
	// commits them. Default 1 hour.
	Grace time.Duration
	// Interval is the time between passes of Run. Default 1 minute.
	Interval time.Duration
	// SweepEvery: Run sweeps for orphans every this many passes. Default 10.
	SweepEvery int
	BlockSize  int          // default layout.BlockSize
	Logger     *slog.Logger // default slog.Default()
	Now        func() time.Time
	// Peers are the other partitions of the namespace. A file renamed
	// from this partition to another keeps its slices, whose ids carry
	// this partition, so the orphan sweep keeps every object that a peer
	// lists as well. A partition that is not a peer of the sweep must
	// never receive a file from this one: its objects would be swept.
	Peers []Admin
	// Report, if not nil, is called by Run on its goroutine after the
	// passes worth recording: the first, and every one that collected or
	// swept anything or failed (a pass that found nothing to do and did
	// not sweep is not reported). It should return promptly.
	Report func(ctx context.Context, p Pass)
}

// Pass is what one pass of Run did.
type Pass struct {
	Start    time.Time
	Duration time.Duration
	Collect  CollectStats
	Swept    bool // the pass swept for orphans
	Orphans  int  // orphan objects the sweep deleted
	Err      error
}

// worthReporting reports whether p is a pass Report is called for.
func (p Pass) worthReporting(first bool) bool {
	return first || p.Err != nil || p.Swept || p.Collect.Slices > 0 || p.Collect.Objects > 0
}

func (c *CollectorConfig) setDefaults() {
	if c.Delay <= 0 {
		c.Delay = 10 * time.Minute
	}
	if c.Grace <= 0 {
		c.Grace = time.Hour
	}
	if c.Interval <= 0 {
		c.Interval = time.Minute
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = 10
	}
	if c.BlockSize <= 0 {
		c.BlockSize = (&Config{}).withDefaults().BlockSize
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

func (c Config) withDefaults() Config { c.setDefaults(); return c }

// Collector removes objects no slice needs any more from one partition's
// share of an object store: the objects of garbage slices (then PURGE),
// and orphans, objects of slices that were allocated but never committed.
// Run's goroutine owns it; Collect and Sweep may also be called directly,
// but not concurrently.
type Collector struct {
	store object.Store
	admin Admin
	cfg   CollectorConfig
}

// CollectStats counts what one pass did.
type CollectStats struct {
	Slices  int // garbage slices purged
	Objects int // objects deleted
}

// NewCollector returns a collector for the partition admin speaks for.
func NewCollector(store object.Store, admin Admin, cfg CollectorConfig) *Collector {
	cfg.setDefaults()
	return &Collector{store: store, admin: admin, cfg: cfg}
}

// listPage is the page size of the slice lists.
const listPage = 1000

// Collect deletes the objects of slices freed more than Delay ago and
// then purges the slices.
func (c *Collector) Collect(ctx context.Context) (CollectStats, error) {
	var st CollectStats
	before := c.cfg.Now().Add(-c.cfg.Delay).UnixNano()
	var after uint64
	for {
		page, err := c.admin.ListGarbage(ctx, after, listPage, before)
		if err != nil {
			return st, fmt.Errorf("collect: list garbage: %w", err)
		}
		var ids []uint64
		for _, ref := range page.Slices {
			after = max(after, ref.Id)
			if err := c.deleteSlice(ctx, ref.Id, int(ref.Size)); err != nil {
				return st, fmt.Errorf("collect: %w", err)
			}
			st.Objects += len(SliceKeys(ref.Id, int(ref.Size), c.cfg.BlockSize))
			ids = append(ids, ref.Id)
		}
		if len(ids) > 0 {
			if err := c.admin.Purge(ctx, ids); err != nil {
				return st, fmt.Errorf("collect: purge: %w", err)
			}
			st.Slices += len(ids)
		}
		if page.Eof || len(page.Slices) == 0 {
			return st, nil
		}
	}
}

func (c *Collector) deleteSlice(ctx context.Context, id uint64, size int) error {
	for _, key := range SliceKeys(id, size, c.cfg.BlockSize) {
		if err := c.store.Delete(ctx, key); err != nil {
			return fmt.Errorf("delete %s: %w", key, err)
		}
	}
	return nil
}

// Sweep deletes orphans: objects of this partition older than Grace whose
// slice no file uses and that is not garbage either, here or in a peer. It lists the store
// before the metadata, so a slice committed during the sweep is seen as
// used.
func (c *Collector) Sweep(ctx context.Context) (deleted int, err error) {
	cutoff := c.cfg.Now().Add(-c.cfg.Grace)
	var candidates []object.Info
	err = c.listObjects(ctx, func(info object.Info, id uint64) {
		if info.Modified.Before(cutoff) {
			candidates = append(candidates, info)
		}
	})
	if err != nil || len(candidates) == 0 {
		return 0, err
	}
	known, err := knownEverywhere(ctx, c.admin, c.cfg.Peers)
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	for _, info := range candidates {
		id, _, _, _ := parseKey(info.Key)
		if _, ok := known[id]; ok {
			continue
		}
		if err := c.store.Delete(ctx, info.Key); err != nil {
			return deleted, fmt.Errorf("sweep: delete %s: %w", info.Key, err)
		}
		c.cfg.Logger.Info("deleted orphan object", "key", info.Key, "modified", info.Modified)
		deleted++
	}
	return deleted, nil
}

// listObjects calls fn for every block object of the partition's slices.
func (c *Collector) listObjects(ctx context.Context, fn func(object.Info, uint64)) error {
	return listPartition(ctx, c.store, c.admin.Partition(), fn)
}

func listPartition(ctx context.Context, store object.Store, part uint16, fn func(object.Info, uint64)) error {
	after := ""
	for {
		page, err := store.List(ctx, chunksPrefix, after, listPage)
		if err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		for _, info := range page {
			after = info.Key
			id, _, _, ok := parseKey(info.Key)
			if ok && protocol.PartitionOf(id) == part {
				fn(info, id)
			}
		}
		if len(page) < listPage {
			return nil
		}
	}
}

// knownEverywhere returns the slices admin's partition knows (its own
// and those of other partitions its files use), and those of its own
// partition that any peer knows. The partition is asked before the peers and again after
// them: a file moving from here to a peer is held here (by the node, then
// by the rename's committed intent) until the peer has it, and a file
// moving from a peer to here is held by the peer until it is here, so
// whichever way a rename runs during the listing, one of the three
// listings sees its slices.
func knownEverywhere(ctx context.Context, admin Admin, peers []Admin) (map[uint64]sliceInfo, error) {
	known, err := knownSlices(ctx, admin)
	if err != nil || len(peers) == 0 {
		return known, err
	}
	part := admin.Partition()
	merge := func(m map[uint64]sliceInfo) {
		for id, info := range m {
			if _, ok := known[id]; !ok && protocol.PartitionOf(id) == part {
				known[id] = info
			}
		}
	}
	for _, peer := range peers {
		m, err := knownSlices(ctx, peer)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", peer.Partition(), err)
		}
		merge(m)
	}
	again, err := knownSlices(ctx, admin)
	if err != nil {
		return nil, err
	}
	merge(again)
	return known, nil
}

// sliceInfo is what the metadata says of one slice.
type sliceInfo struct {
	size    uint32
	garbage bool
	inline  bool // held inline by the partition: no object expected yet
}

// knownSlices returns every slice the partition knows: used by files, and
// garbage not yet purged.
func knownSlices(ctx context.Context, admin Admin) (map[uint64]sliceInfo, error) {
	known := map[uint64]sliceInfo{}
	var after uint64
	for {
		page, err := admin.ListSlices(ctx, after, listPage)
		if err != nil {
			return nil, fmt.Errorf("list slices: %w", err)
		}
		for _, ref := range page.Slices {
			known[ref.Id] = sliceInfo{size: ref.Size, inline: ref.Inline}
			after = max(after, ref.Id)
		}
		if page.Eof || len(page.Slices) == 0 {
			break
		}
	}
	after = 0
	for {
		page, err := admin.ListGarbage(ctx, after, listPage, math.MaxInt64)
		if err != nil {
			return nil, fmt.Errorf("list garbage: %w", err)
		}
		for _, ref := range page.Slices {
			if _, used := known[ref.Id]; !used {
				known[ref.Id] = sliceInfo{size: ref.Size, garbage: true}
			}
			after = max(after, ref.Id)
		}
		if page.Eof || len(page.Slices) == 0 {
			return known, nil
		}
	}
}

// Run collects every Interval and sweeps every SweepEvery passes until ctx
// ends. Failures are logged and retried at the next pass.
func (c *Collector) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for pass := 0; ; pass++ {
		p := Pass{Start: c.cfg.Now()}
		st, err := c.Collect(ctx)
		p.Collect = st
		if err != nil && !errors.Is(err, context.Canceled) {
			c.cfg.Logger.Warn("collector", "err", err)
			p.Err = err
		} else if st.Slices > 0 {
			c.cfg.Logger.Info("collected garbage", "slices", st.Slices, "objects", st.Objects)
		}
		if pass%c.cfg.SweepEvery == c.cfg.SweepEvery-1 && ctx.Err() == nil {
			p.Swept = true
			n, err := c.Sweep(ctx)
			p.Orphans = n
			if err != nil && !errors.Is(err, context.Canceled) {
				c.cfg.Logger.Warn("orphan sweep", "err", err)
				p.Err = errors.Join(p.Err, err)
			}
		}
		p.Duration = c.cfg.Now().Sub(p.Start)
		if c.cfg.Report != nil && ctx.Err() == nil && p.worthReporting(pass == 0) {
			c.cfg.Report(ctx, p)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
