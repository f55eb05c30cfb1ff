package data

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/canopyfs/canopy/internal/object"
)

func localStore(t *testing.T) object.Store {
	t.Helper()
	s, err := object.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func blockBytes(id uint64, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = fill(id, k)
	}
	return b
}

func TestCacheReadsEvictsAndShares(t *testing.T) {
	ctx := context.Background()
	store := localStore(t)
	const size = 1000
	for id := uint64(1); id <= 20; id++ {
		if err := store.Put(ctx, blockKey(id, 0, size), blockBytes(id, size)); err != nil {
			t.Fatal(err)
		}
	}
	pool := newBufPool(size)
	c := newBlockCache(store, pool, 5*size, 4)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for round := 0; round < 20; round++ {
				for id := uint64(1); id <= 20; id++ {
					data, release, err := c.get(ctx, blockRef{id: id, size: size})
					if err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(data, blockBytes(id, size)) {
						release()
						errs <- fmt.Errorf("block %d: wrong bytes", id)
						return
					}
					release()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes > 5*size {
		t.Fatalf("cache holds %d bytes, limit %d", c.bytes, 5*size)
	}
	if len(c.m) != c.lru.Len() {
		t.Fatalf("map has %d blocks, list %d", len(c.m), c.lru.Len())
	}
}

func TestCacheMissingAndShortObjects(t *testing.T) {
	ctx := context.Background()
	store := localStore(t)
	c := newBlockCache(store, newBufPool(100), 1000, 2)
	if _, _, err := c.get(ctx, blockRef{id: 7, size: 100}); !errors.Is(err, object.ErrNotFound) {
		t.Fatalf("missing block: %v, want ErrNotFound", err)
	}
	// The key claims 100 bytes, the object holds 50.
	if err := store.Put(ctx, blockKey(8, 0, 100), make([]byte, 50)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.get(ctx, blockRef{id: 8, size: 100}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short block: %v, want ErrCorrupt", err)
	}
	// A failed block is not kept: once the object is there, it reads.
	if err := store.Put(ctx, blockKey(7, 0, 100), blockBytes(7, 100)); err != nil {
		t.Fatal(err)
	}
	data, release, err := c.get(ctx, blockRef{id: 7, size: 100})
	if err != nil || !bytes.Equal(data, blockBytes(7, 100)) {
		t.Fatalf("block after upload: %v", err)
	}
	release()
}

// TestCacheSmallBlocksHoldTheirSize: a block much smaller than the block
// size (the last block of a small file) is held in a buffer of its own
// size, so that a cache of many small files holds about what it counts
// against its limit; a block near the block size is in a pooled buffer.
func TestCacheSmallBlocksHoldTheirSize(t *testing.T) {
	ctx := context.Background()
	store := localStore(t)
	const blockSize, small = 1 << 20, 3000
	for id, n := range map[uint64]int{1: small, 2: blockSize} {
		if err := store.Put(ctx, blockKey(id, 0, n), blockBytes(id, n)); err != nil {
			t.Fatal(err)
		}
	}
	c := newBlockCache(store, newBufPool(blockSize), 64*blockSize, 2)
	for id, n := range map[uint64]int{1: small, 2: blockSize} {
		data, release, err := c.get(ctx, blockRef{id: id, size: n})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, blockBytes(id, n)) {
			t.Fatalf("block %d: wrong bytes", id)
		}
		want := blockSize
		if n < blockSize/4 {
			want = small
		}
		if cap(data) != want {
			t.Fatalf("block %d of %d bytes held in a buffer of %d, want %d", id, n, cap(data), want)
		}
		release()
	}
}
