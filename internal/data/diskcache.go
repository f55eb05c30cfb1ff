package data

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// diskCache keeps blocks read from the object store in files under a
// directory, up to a number of bytes, for the reads the memory cache no
// longer holds and across restarts of the client (a mount's --cache-dir).
// Objects are never rewritten (a slice's id is never used again and a
// block's key names its size), so an entry never goes stale.
//
// An entry is the block's bytes followed by a trailer: the CRC-32C of the
// bytes and a magic word. It is written to a temporary file and renamed
// into place, without fsync: after a crash an entry may be missing, short
// or hold other bytes, and a read that finds its length, magic or checksum
// wrong removes it and reads the object store instead, so a torn entry is
// never served.
//
// Eviction is least recently used, by the order of reads in this process
// and, for the entries found at start, by their modification times.
//
// Safe for concurrent use; mu guards the index, the list and the byte
// count. File reads and writes happen outside mu.
type diskCache struct {
	dir   string
	limit int64
	log   *slog.Logger

	mu    sync.Mutex
	m     map[string]*list.Element // entry name -> element holding *diskEntry
	lru   *list.List               // front: most recent
	bytes int64                    // file bytes of the entries indexed
	tmp   uint64                   // counter for temporary file names

	stats diskCounters
}

type diskEntry struct {
	name string
	size int64 // file size, trailer included
}

// diskCounters count what the disk cache did; any goroutine may read them.
type diskCounters struct {
	hits, misses, torn, stored, evicted atomic.Uint64
}

// DiskCacheStats are the counters of a Volume's on-disk block cache.
type DiskCacheStats struct {
	Hits    uint64 // blocks read from the disk cache
	Misses  uint64 // blocks the disk cache did not have
	Torn    uint64 // entries found damaged (length, magic or checksum) and removed
	Stored  uint64 // blocks written to the disk cache
	Evicted uint64 // entries removed to stay under the bound
	Bytes   int64  // bytes the entries take now
}

const (
	diskTrailer = 8
	diskMagic   = 0x43414e31 // "CAN1"
	diskSuffix  = ".blk"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// openDiskCache opens (creating it if needed) the disk cache in dir,
// bounded to limit bytes, and indexes the entries a previous process left
// there, removing temporary files and evicting down to limit.
func openDiskCache(dir string, limit int64, log *slog.Logger) (*diskCache, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("disk cache %s: size must be positive", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("disk cache: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &diskCache{dir: dir, limit: limit, log: log, m: map[string]*list.Element{}, lru: list.New()}
	type found struct {
		name string
		size int64
		mod  int64
	}
	var entries []found
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(rel, diskSuffix) {
			os.Remove(p) // a temporary file of a write that did not finish
			return nil
		}
		info, err := de.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		entries = append(entries, found{name: filepath.ToSlash(rel), size: info.Size(), mod: info.ModTime().UnixNano()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("disk cache %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].mod > entries[j].mod })
	for _, e := range entries {
		d.m[e.name] = d.lru.PushBack(&diskEntry{name: e.name, size: e.size})
		d.bytes += e.size
	}
	d.mu.Lock()
	victims := d.evictLocked(0)
	d.mu.Unlock()
	d.remove(victims)
	return d, nil
}

// entryName is the file of the object key, below dir: keys are
// "chunks/..." paths already spread over directories.
func entryName(key string) string { return key + diskSuffix }

// get reads the block of key, exactly len(buf) bytes, into buf; false if
// the cache does not have it whole.
func (d *diskCache) get(key string, buf []byte) bool {
	name := entryName(key)
	d.mu.Lock()
	el, ok := d.m[name]
	if ok {
		d.lru.MoveToFront(el)
	}
	d.mu.Unlock()
	if !ok {
		d.stats.misses.Add(1)
		return false
	}
	if err := d.read(name, buf); err != nil {
		d.stats.misses.Add(1)
		if errors.Is(err, fs.ErrNotExist) { // evicted by another reader meanwhile
			d.forget(name)
			return false
		}
		d.stats.torn.Add(1)
		d.log.Warn("disk cache entry damaged; removed", "entry", name, "err", err)
		d.forget(name)
		os.Remove(d.path(name))
		return false
	}
	d.stats.hits.Add(1)
	return true
}

// errTorn reports a disk cache entry whose length, magic or checksum is
// wrong.
var errTorn = errors.New("torn disk cache entry")

func (d *diskCache) read(name string, buf []byte) error {
	f, err := os.Open(d.path(name))
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if info.Size() != int64(len(buf))+diskTrailer {
		return fmt.Errorf("%w: %d bytes for a block of %d", errTorn, info.Size(), len(buf))
	}
	var tr [diskTrailer]byte
	if _, err := f.ReadAt(buf, 0); err != nil {
		return err
	}
	if _, err := f.ReadAt(tr[:], int64(len(buf))); err != nil {
		return err
	}
	if binary.LittleEndian.Uint32(tr[4:]) != diskMagic {
		return fmt.Errorf("%w: bad magic", errTorn)
	}
	if binary.LittleEndian.Uint32(tr[:4]) != crc32.Checksum(buf, castagnoli) {
		return fmt.Errorf("%w: checksum mismatch", errTorn)
	}
	return nil
}

// put stores the block of key; a failure is logged and leaves the cache
// without it.
func (d *diskCache) put(key string, data []byte) {
	name := entryName(key)
	size := int64(len(data)) + diskTrailer
	if size > d.limit {
		return
	}
	d.mu.Lock()
	if _, ok := d.m[name]; ok {
		d.mu.Unlock()
		return
	}
	d.tmp++
	tmp := fmt.Sprintf("%s.%d.tmp", d.path(name), d.tmp)
	d.mu.Unlock()
	if err := d.write(tmp, d.path(name), data); err != nil {
		os.Remove(tmp)
		d.log.Warn("disk cache write failed", "entry", name, "err", err)
		return
	}
	d.stats.stored.Add(1)
	d.mu.Lock()
	if _, ok := d.m[name]; ok { // stored by a concurrent reader meanwhile
		d.mu.Unlock()
		return
	}
	d.m[name] = d.lru.PushFront(&diskEntry{name: name, size: size})
	d.bytes += size
	victims := d.evictLocked(0)
	d.mu.Unlock()
	d.remove(victims)
}

func (d *diskCache) write(tmp, final string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	var tr [diskTrailer]byte
	binary.LittleEndian.PutUint32(tr[:4], crc32.Checksum(data, castagnoli))
	binary.LittleEndian.PutUint32(tr[4:], diskMagic)
	_, err = f.Write(data)
	if err == nil {
		_, err = f.Write(tr[:])
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, final)
}

// evictLocked takes least recently used entries out of the index until
// the cache holds at most limit-room bytes, and returns their names for
// remove.
func (d *diskCache) evictLocked(room int64) []string {
	var victims []string
	for d.bytes > d.limit-room {
		el := d.lru.Back()
		if el == nil {
			break
		}
		e := el.Value.(*diskEntry)
		d.lru.Remove(el)
		delete(d.m, e.name)
		d.bytes -= e.size
		victims = append(victims, e.name)
	}
	return victims
}

func (d *diskCache) remove(names []string) {
	for _, n := range names {
		os.Remove(d.path(n))
		d.stats.evicted.Add(1)
	}
}

// forget takes name out of the index.
func (d *diskCache) forget(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if el, ok := d.m[name]; ok {
		d.bytes -= el.Value.(*diskEntry).size
		d.lru.Remove(el)
		delete(d.m, name)
	}
}

func (d *diskCache) path(name string) string { return filepath.Join(d.dir, filepath.FromSlash(name)) }

// snapshot returns the disk cache's counters.
func (d *diskCache) snapshot() DiskCacheStats {
	d.mu.Lock()
	bytes := d.bytes
	d.mu.Unlock()
	return DiskCacheStats{Hits: d.stats.hits.Load(), Misses: d.stats.misses.Load(), Torn: d.stats.torn.Load(),
		Stored: d.stats.stored.Load(), Evicted: d.stats.evicted.Load(), Bytes: bytes}
}
