package data

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/canopyfs/canopy/internal/object"
)

// diskCacheRead reads block id of size through a fresh memory cache over
// store and the disk cache in dir.
func diskCacheRead(t *testing.T, store object.Store, d *diskCache, id uint64, size int) []byte {
	t.Helper()
	c := newBlockCache(store, newBufPool(size), int64(size), 2)
	c.disk = d
	data, release, err := c.get(context.Background(), blockRef{id: id, size: size})
	if err != nil {
		t.Fatalf("block %d: %v", id, err)
	}
	defer release()
	return bytes.Clone(data)
}

// TestDiskCacheServesAfterReopen reads blocks through a disk cache, then
// through a new one on the same directory over a store that has lost
// them: the second reads come from disk.
func TestDiskCacheServesAfterReopen(t *testing.T) {
	ctx := context.Background()
	dir, objects := t.TempDir(), t.TempDir()
	store, err := object.NewLocal(objects)
	if err != nil {
		t.Fatal(err)
	}
	const size = 5000
	for id := uint64(1); id <= 3; id++ {
		must(t, store.Put(ctx, blockKey(id, 0, size), blockBytes(id, size)))
	}
	d, err := openDiskCache(dir, 1<<20, nil)
	must(t, err)
	for id := uint64(1); id <= 3; id++ {
		if got := diskCacheRead(t, store, d, id, size); !bytes.Equal(got, blockBytes(id, size)) {
			t.Fatalf("block %d: wrong bytes from the store", id)
		}
	}
	if s := d.snapshot(); s.Stored != 3 || s.Hits != 0 || s.Bytes != 3*(size+diskTrailer) {
		t.Fatalf("after the first reads: %+v", s)
	}
	// The objects go: only the disk cache has the bytes now.
	must(t, os.RemoveAll(objects))
	must(t, os.Mkdir(objects, 0o755))
	d2, err := openDiskCache(dir, 1<<20, nil)
	must(t, err)
	if s := d2.snapshot(); s.Bytes != 3*(size+diskTrailer) {
		t.Fatalf("reopened cache indexes %d bytes, want %d", s.Bytes, 3*(size+diskTrailer))
	}
	for id := uint64(1); id <= 3; id++ {
		if got := diskCacheRead(t, store, d2, id, size); !bytes.Equal(got, blockBytes(id, size)) {
			t.Fatalf("block %d: wrong bytes from the disk cache", id)
		}
	}
	if s := d2.snapshot(); s.Hits != 3 || s.Misses != 0 {
		t.Fatalf("after the reopen: %+v, want 3 hits", s)
	}
}

// TestDiskCacheTornEntries damages entries the ways a crash or a bad disk
// can (short, empty, a flipped byte, a wrong trailer): none is served,
// each is removed, and the reads go to the store.
func TestDiskCacheTornEntries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := localStore(t)
	const size = 3000
	damage := []func(b []byte) []byte{
		func(b []byte) []byte { return b[:len(b)/2] },                           // torn write
		func(b []byte) []byte { return nil },                                    // renamed before its data reached the disk
		func(b []byte) []byte { b[10] ^= 0x40; return b },                       // a flipped bit
		func(b []byte) []byte { b[len(b)-1] ^= 1; return b },                    // a bad magic
		func(b []byte) []byte { return append(b[:size-1:size-1], b[size:]...) }, // one byte short, trailer intact
	}
	d, err := openDiskCache(dir, 1<<20, nil)
	must(t, err)
	for i := range damage {
		id := uint64(100 + i)
		must(t, store.Put(ctx, blockKey(id, 0, size), blockBytes(id, size)))
		diskCacheRead(t, store, d, id, size)
	}
	for i, dmg := range damage {
		id := uint64(100 + i)
		p := d.path(entryName(blockKey(id, 0, size)))
		b, err := os.ReadFile(p)
		must(t, err)
		must(t, os.WriteFile(p, dmg(b), 0o600))
	}
	// Damaged in place, and found so by a cache reopened on them as well.
	for _, dc := range []string{"same", "reopened"} {
		if dc == "reopened" {
			for i, dmg := range damage {
				id := uint64(100 + i)
				p := d.path(entryName(blockKey(id, 0, size)))
				must(t, os.MkdirAll(filepath.Dir(p), 0o700))
				must(t, os.WriteFile(p, dmg(append(blockBytes(id, size), 1, 2, 3, 4, 5, 6, 7, 8)), 0o600))
			}
			if d, err = openDiskCache(dir, 1<<20, nil); err != nil {
				t.Fatal(err)
			}
		}
		for i := range damage {
			id := uint64(100 + i)
			if got := diskCacheRead(t, store, d, id, size); !bytes.Equal(got, blockBytes(id, size)) {
				t.Fatalf("%s cache, damage %d: wrong bytes served", dc, i)
			}
		}
		if s := d.snapshot(); s.Torn != uint64(len(damage)) || s.Hits != 0 {
			t.Fatalf("%s cache: %+v, want %d torn and no hits", dc, s, len(damage))
		}
		// Read again: the entries were stored anew from the store, whole.
		for i := range damage {
			id := uint64(100 + i)
			buf := make([]byte, size)
			if !d.get(blockKey(id, 0, size), buf) || !bytes.Equal(buf, blockBytes(id, size)) {
				t.Fatalf("%s cache, damage %d: not stored again whole", dc, i)
			}
		}
	}
}

// TestDiskCacheBounded fills a disk cache far past its bound: it never
// holds more, on disk as in its count, and keeps what was read last.
func TestDiskCacheBounded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := localStore(t)
	const size, keep = 4000, 4
	limit := int64(keep * (size + diskTrailer))
	d, err := openDiskCache(dir, limit, nil)
	must(t, err)
	for id := uint64(1); id <= 30; id++ {
		must(t, store.Put(ctx, blockKey(id, 0, size), blockBytes(id, size)))
		diskCacheRead(t, store, d, id, size)
		// Block 1 is read again after every other: it stays.
		buf := make([]byte, size)
		if id > 1 && !d.get(blockKey(1, 0, size), buf) {
			t.Fatalf("after block %d: the most recently used block was evicted", id)
		}
		if on := diskBytes(t, dir); on > limit || d.snapshot().Bytes > limit {
			t.Fatalf("after block %d: %d bytes on disk, %d counted, bound %d", id, on, d.snapshot().Bytes, limit)
		}
	}
	if s := d.snapshot(); s.Evicted != 30-keep {
		t.Fatalf("%+v, want %d evicted", s, 30-keep)
	}
	// A smaller bound at the next start evicts down to it.
	d, err = openDiskCache(dir, 2*(size+diskTrailer), nil)
	must(t, err)
	if on := diskBytes(t, dir); on > 2*(size+diskTrailer) {
		t.Fatalf("reopened with a smaller bound: %d bytes on disk", on)
	}
}

func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	must(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return err
	}))
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
