package data

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/canopyfs/canopy/internal/object"
)

// blockRef names one object: block index of slice id, size bytes long.
type blockRef struct {
	id    uint64
	index int
	size  int
}

// cached is one block in the cache. data is valid once ready is closed and
// err is nil; it goes back to the pool when the block has been evicted and
// no reader holds it.
type cached struct {
	ref   blockRef
	ready chan struct{}
	data  []byte
	err   error
	refs  int           // readers holding data; guarded by blockCache.mu
	elem  *list.Element // place in the LRU list; nil once evicted
}

// blockCache keeps recently read blocks in memory, up to a number of
// bytes, evicting the least recently used. Concurrent requests for one
// block share one download. Safe for concurrent use; mu guards the map,
// the list, the byte count and every entry's refs and elem.
type blockCache struct {
	store object.Store
	pool  *bufPool
	limit int64
	slots chan struct{} // a token per download in flight
	disk  *diskCache    // blocks kept on disk (Config.CacheDir); nil for none

	mu    sync.Mutex
	m     map[blockRef]*cached
	lru   *list.List // front: most recent
	bytes int64

	stats cacheCounters
}

// cacheCounters count what the cache did; any goroutine may read them.
type cacheCounters struct {
	hits, misses, prefetches, fetchedBytes atomic.Uint64
}

// CacheStats are a Volume's block cache counters.
type CacheStats struct {
	Hits         uint64 // reads of a block that was cached or already coming
	Misses       uint64 // reads that had to start a download
	Prefetches   uint64 // downloads started ahead of reads (readahead)
	FetchedBytes uint64 // bytes downloaded from the object store
	Bytes        int64  // bytes the cache holds now
}

func newBlockCache(store object.Store, pool *bufPool, limit int64, downloads int) *blockCache {
	return &blockCache{
		store: store, pool: pool, limit: limit, slots: make(chan struct{}, downloads),
		m: map[blockRef]*cached{}, lru: list.New(),
	}
}

// get returns the block's bytes, downloading them if needed, and a release
// function the caller must call when done with them.
func (c *blockCache) get(ctx context.Context, ref blockRef) ([]byte, func(), error) {
	e, found := c.acquire(ref, true)
	if found {
		c.stats.hits.Add(1)
	} else {
		c.stats.misses.Add(1)
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		c.release(e)
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		c.release(e)
		return nil, nil, e.err
	}
	return e.data, func() { c.release(e) }, nil
}

// buffer returns a buffer for a block of n bytes: a pooled one, of the
// block size, for a block near that size; one of n bytes for a small
// block (the last block of a small file), so that what the cache holds is
// what it counts against its limit, not a whole block size per small file.
func (c *blockCache) buffer(n int) []byte {
	if n < c.pool.size/4 {
		return make([]byte, n)
	}
	return c.pool.get(n)
}

// prefetch starts downloading the block unless it is cached or coming.
func (c *blockCache) prefetch(ref blockRef) {
	c.mu.Lock()
	_, ok := c.m[ref]
	c.mu.Unlock()
	if ok {
		return
	}
	// Do not queue prefetches behind a full set of downloads.
	select {
	case c.slots <- struct{}{}:
		<-c.slots
	default:
		return
	}
	e, found := c.acquire(ref, true)
	if !found {
		c.stats.prefetches.Add(1)
	}
	c.release(e)
}

// acquire returns the entry of ref with a reference held, starting its
// download if it is new (found false).
func (c *blockCache) acquire(ref blockRef, fetch bool) (e *cached, found bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[ref]; ok {
		e.refs++
		if e.elem != nil {
			c.lru.MoveToFront(e.elem)
		}
		return e, true
	}
	e = &cached{ref: ref, ready: make(chan struct{}), refs: 1}
	e.elem = c.lru.PushFront(e)
	c.m[ref] = e
	c.bytes += int64(ref.size)
	c.evictLocked()
	go c.fetch(e)
	return e, false
}

// snapshot returns the cache's counters.
func (c *blockCache) snapshot() CacheStats {
	c.mu.Lock()
	bytes := c.bytes
	c.mu.Unlock()
	return CacheStats{Hits: c.stats.hits.Load(), Misses: c.stats.misses.Load(), Prefetches: c.stats.prefetches.Load(),
		FetchedBytes: c.stats.fetchedBytes.Load(), Bytes: bytes}
}

// fetch downloads e's block; it runs on its own goroutine.
func (c *blockCache) fetch(e *cached) {
	c.slots <- struct{}{}
	defer func() { <-c.slots }()
	buf := c.buffer(e.ref.size)
	key := blockKey(e.ref.id, e.ref.index, e.ref.size)
	var err error
	fromDisk := c.disk != nil && c.disk.get(key, buf)
	if !fromDisk {
		err = readObject(context.Background(), c.store, key, buf)
	}
	c.mu.Lock()
	if err != nil {
		c.pool.put(buf)
		e.err = err
		// A failed block is not kept: the next reader tries again.
		if e.elem != nil {
			c.lru.Remove(e.elem)
			e.elem = nil
			c.bytes -= int64(e.ref.size)
			delete(c.m, e.ref)
		}
	} else {
		e.data = buf
		if !fromDisk {
			c.stats.fetchedBytes.Add(uint64(len(buf)))
		}
	}
	c.mu.Unlock()
	if err == nil && !fromDisk && c.disk != nil {
		// Before the readers see the block, so that a read that returned
		// finds it on disk too (the write goes to the page cache).
		c.disk.put(key, buf)
	}
	close(e.ready)
}

// release drops a reference taken by acquire.
func (c *blockCache) release(e *cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	c.freeLocked(e)
}

// freeLocked returns an evicted, unreferenced, downloaded block's buffer
// to the pool.
func (c *blockCache) freeLocked(e *cached) {
	if e.elem == nil && e.refs == 0 && e.data != nil {
		c.pool.put(e.data)
		e.data = nil
	}
}

// evictLocked drops least recently used blocks until the cache fits its
// limit; blocks still downloading are kept.
func (c *blockCache) evictLocked() {
	for el := c.lru.Back(); el != nil && c.bytes > c.limit; {
		prev := el.Prev()
		e := el.Value.(*cached)
		select {
		case <-e.ready:
			c.lru.Remove(el)
			e.elem = nil
			c.bytes -= int64(e.ref.size)
			delete(c.m, e.ref)
			c.freeLocked(e)
		default:
		}
		el = prev
	}
}

// drop forgets every block of slice id (its objects are being deleted).
func (c *blockCache) drop(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ref, e := range c.m {
		if ref.id != id || e.elem == nil {
			continue
		}
		select {
		case <-e.ready:
			c.lru.Remove(e.elem)
			e.elem = nil
			c.bytes -= int64(ref.size)
			delete(c.m, ref)
			c.freeLocked(e)
		default:
		}
	}
}

// readObject reads the whole object key into buf, which must be exactly
// its length.
func readObject(ctx context.Context, store object.Store, key string, buf []byte) error {
	r, err := store.Get(ctx, key, 0, int64(len(buf))+1)
	if err != nil {
		return fmt.Errorf("read block: %w", err)
	}
	defer r.Close()
	n, err := io.ReadFull(r, buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return fmt.Errorf("read block %s: %d of %d bytes: %w", key, n, len(buf), ErrCorrupt)
	}
	if err != nil {
		return fmt.Errorf("read block %s: %w", key, err)
	}
	var one [1]byte
	if m, _ := r.Read(one[:]); m > 0 {
		return fmt.Errorf("read block %s: longer than %d bytes: %w", key, len(buf), ErrCorrupt)
	}
	return nil
}
