package data

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/canopyfs/canopy/internal/layout"
	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/protocol"
)

// Config sizes a Volume. Zero fields take the defaults.
type Config struct {
	ChunkSize   int   // file bytes per chunk; default layout.ChunkSize
	BlockSize   int   // largest object of a slice; default layout.BlockSize
	Uploads     int   // block uploads in flight per Volume; default 32 (128 MiB of blocks)
	Downloads   int   // block downloads in flight per Volume; default 16
	CacheBytes  int64 // block cache capacity; default 256 MiB
	Readahead   int   // most bytes a sequential reader fetches ahead; default 32 MiB
	IDBatch     int   // slice ids reserved per ALLOC_SLICES; default 64
	CompactAt   int   // stored slices that make a chunk fragmented; default 16, <0 never
	CommitAfter int   // finished slices a writer keeps before committing on its own; default 256
	// BufferBytes bounds the block buffers the Volume's writers hold at
	// once, however many files are open; default 512 MiB, at least one
	// block. A writer waits for room while uploads are in flight.
	BufferBytes int64
	// CacheDir, if set, keeps blocks read from the object store in files
	// under this directory as well, up to CacheDirBytes (default 1 GiB),
	// for reads the memory cache no longer holds and across restarts.
	CacheDir      string
	CacheDirBytes int64
	// NoInline stores every slice as objects before its commit, even
	// where the partition would take a small file's bytes inline.
	NoInline bool
}

// DefaultCacheDirBytes is the default bound of Config.CacheDir.
const DefaultCacheDirBytes = 1 << 30

func (c *Config) setDefaults() {
	if c.ChunkSize <= 0 {
		c.ChunkSize = layout.ChunkSize
	}
	if c.BlockSize <= 0 {
		c.BlockSize = layout.BlockSize
	}
	if c.Uploads <= 0 {
		c.Uploads = 32
	}
	if c.Downloads <= 0 {
		c.Downloads = 16
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = 256 << 20
	}
	if c.Readahead <= 0 {
		c.Readahead = 32 << 20
	}
	if c.IDBatch <= 0 {
		c.IDBatch = 64
	}
	if c.CompactAt == 0 {
		c.CompactAt = 16
	}
	if c.CommitAfter <= 0 {
		c.CommitAfter = 256
	}
	if c.BufferBytes <= 0 {
		c.BufferBytes = DefaultBufferBytes
	}
	c.BufferBytes = max(c.BufferBytes, int64(c.BlockSize))
	if c.CacheDirBytes <= 0 {
		c.CacheDirBytes = DefaultCacheDirBytes
	}
}

// DefaultBufferBytes is the default bound on a Volume's write buffers.
const DefaultBufferBytes = 512 << 20

// Volume is the object store of one client's files with what the files
// share: the block cache, the buffer pool, the bounds on transfers in
// flight and the slice ids reserved in advance. Safe for concurrent use.
type Volume struct {
	Store     object.Store
	ChunkSize int
	BlockSize int

	cfg     Config
	pool    *bufPool
	cache   *blockCache
	uploads chan struct{} // a token per upload in flight
	budget  *writeBudget  // bounds the writers' block buffers
	ids     *idAllocator

	compacting sync.Map // chunkRef -> struct{}: compactions in flight
	bg         sync.WaitGroup
}

// NewVolume returns a Volume storing objects in store.
func NewVolume(store object.Store, cfg Config) (*Volume, error) {
	cfg.setDefaults()
	// The sizes come from the server (VOLUME): refuse what would make
	// every buffer huge or positions overflow.
	if cfg.BlockSize > 64<<20 || cfg.ChunkSize > 1<<30 {
		return nil, fmt.Errorf("volume: block size %d or chunk size %d out of range", cfg.BlockSize, cfg.ChunkSize)
	}
	if cfg.BlockSize > cfg.ChunkSize || cfg.ChunkSize%cfg.BlockSize != 0 {
		return nil, fmt.Errorf("volume: chunk size %d is not a multiple of block size %d", cfg.ChunkSize, cfg.BlockSize)
	}
	pool := newBufPool(cfg.BlockSize)
	v := &Volume{
		Store: store, ChunkSize: cfg.ChunkSize, BlockSize: cfg.BlockSize,
		cfg: cfg, pool: pool,
		cache:   newBlockCache(store, pool, cfg.CacheBytes, cfg.Downloads),
		uploads: make(chan struct{}, cfg.Uploads),
		ids:     newIDAllocator(cfg.IDBatch),
		budget:  newWriteBudget(cfg.BufferBytes),
	}
	if cfg.CacheDir != "" {
		d, err := openDiskCache(cfg.CacheDir, cfg.CacheDirBytes, nil)
		if err != nil {
			return nil, fmt.Errorf("volume: %w", err)
		}
		v.cache.disk = d
	}
	return v, nil
}

// CacheStats returns the block cache's counters.
func (v *Volume) CacheStats() CacheStats { return v.cache.snapshot() }

// DiskCacheStats returns the on-disk block cache's counters; ok is false
// without one (Config.CacheDir).
func (v *Volume) DiskCacheStats() (stats DiskCacheStats, ok bool) {
	if v.cache.disk == nil {
		return DiskCacheStats{}, false
	}
	return v.cache.disk.snapshot(), true
}

// BufferStats returns the bytes of block buffers the Volume's writers
// hold now and the most they have held at once (bounded by
// Config.BufferBytes).
func (v *Volume) BufferStats() (held, peak int64) { return v.budget.stats() }

// Wait waits for the background work the Volume started (compactions).
func (v *Volume) Wait() { v.bg.Wait() }

// blockKey is the object key of block index of slice id, size bytes long.
func blockKey(id uint64, index, size int) string { return layout.BlockKey(id, index, size) }

// blockLen is the length of block index of a slice of size bytes.
func (v *Volume) blockLen(size, index int) int {
	n := size - index*v.BlockSize
	return max(0, min(n, v.BlockSize))
}

// SliceKeys returns the object keys of slice id of size bytes stored in
// blocks of blockSize.
func SliceKeys(id uint64, size, blockSize int) []string {
	var keys []string
	for i := 0; i*blockSize < size; i++ {
		keys = append(keys, blockKey(id, i, min(blockSize, size-i*blockSize)))
	}
	return keys
}

// ErrCorrupt reports an object whose length disagrees with the metadata.
var ErrCorrupt = errors.New("object has the wrong length")

// idAllocator hands out slice ids reserved in batches, one pool per
// partition. Safe for concurrent use.
type idAllocator struct {
	batch uint32

	mu   sync.Mutex
	next map[uint16][2]uint64 // partition -> [next id, end]
}

func newIDAllocator(batch int) *idAllocator {
	return &idAllocator{batch: uint32(batch), next: map[uint16][2]uint64{}}
}

// alloc returns a new slice id in the partition of ino.
func (a *idAllocator) alloc(ctx context.Context, meta Meta, ino uint64) (uint64, error) {
	part := protocol.PartitionOf(ino)
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.next[part]
	if r[0] >= r[1] {
		first, n, err := meta.AllocSlices(ctx, ino, a.batch)
		if err != nil {
			return 0, fmt.Errorf("allocate slice ids: %w", err)
		}
		if n == 0 || first == 0 {
			return 0, fmt.Errorf("allocate slice ids: the server gave none")
		}
		r = [2]uint64{first, first + uint64(n)}
	}
	id := r[0]
	r[0]++
	a.next[part] = r
	return id, nil
}
