package fuse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
)

// TestMetricsCountOperations checks the per-operation counters and
// timings follow what callers did on the mount.
func TestMetricsCountOperations(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := mountTest(t, Options{Metrics: reg, EntryTimeout: 0, AttrTimeout: 0})
	m := f.m.FS.m
	mkdirs := testutil.ToFloat64(m.ops.WithLabelValues(opMkdir, "ok"))
	for i := range 5 {
		must(t, os.Mkdir(f.path(fmt.Sprint("d", i)), 0o755))
	}
	for range 3 {
		if _, err := os.Stat(f.path("missing")); !errors.Is(err, syscall.ENOENT) {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(f.path("d0"), 0o755); !errors.Is(err, syscall.EEXIST) {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.ops.WithLabelValues(opMkdir, "ok")) - mkdirs; got != 5 {
		t.Errorf("mkdir ok: %v, want 5", got)
	}
	if got := testutil.ToFloat64(m.ops.WithLabelValues(opLookup, "ENOENT")); got < 3 {
		t.Errorf("lookup ENOENT: %v, want at least 3", got)
	}
	if got := testutil.ToFloat64(m.ops.WithLabelValues(opMkdir, "EEXIST")); got != 1 {
		// The kernel looks d0 up first and may answer EEXIST itself.
		if testutil.ToFloat64(m.ops.WithLabelValues(opLookup, "ok")) == 0 {
			t.Errorf("mkdir EEXIST: %v and no lookup", got)
		}
	}
	if n := testutil.CollectAndCount(m.seconds); n == 0 {
		t.Error("no operation timings")
	}
}

// TestMetricsCacheAndLocks checks the block cache counters and the lock
// operations on --metrics-listen: a file written and read twice through
// the mount (the second read from the cache), and a flock.
func TestMetricsCacheAndLocks(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := mountTest(t, Options{Metrics: reg})
	p := f.path("data")
	want := randomBytes(3<<20, 5)
	must(t, os.WriteFile(p, want, 0o644))
	counter := func(name string) float64 {
		mfs, err := reg.Gather()
		must(t, err)
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	got, err := os.ReadFile(p)
	must(t, err)
	sameBytes(t, "first read", got, want)
	misses, fetched := counter("canopy_fuse_block_cache_misses_total")+counter("canopy_fuse_block_cache_prefetches_total"),
		counter("canopy_fuse_block_cache_fetched_bytes_total")
	if misses < 1 || fetched < 3<<20 {
		t.Errorf("after the first read: %v downloads started, %v bytes fetched; want at least 1 and 3 MiB", misses, fetched)
	}
	hits := counter("canopy_fuse_block_cache_hits_total")
	got, err = os.ReadFile(p) // the kernel's page cache is dropped at open
	must(t, err)
	sameBytes(t, "second read", got, want)
	if h := counter("canopy_fuse_block_cache_hits_total"); h <= hits {
		t.Errorf("second read: cache hits %v, before %v", h, hits)
	}
	if fb := counter("canopy_fuse_block_cache_fetched_bytes_total"); fb != fetched {
		t.Errorf("second read fetched %v more bytes", fb-fetched)
	}
	fd, err := os.Open(p)
	must(t, err)
	must(t, syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	must(t, fd.Close())
	if got := testutil.ToFloat64(f.m.FS.m.ops.WithLabelValues(opSetlk, "ok")); got < 1 {
		t.Errorf("setlk ok: %v", got)
	}
}

// TestConcurrentCallers runs several goroutines creating, listing,
// renaming and removing in the same directories at once (run it with
// -race), then checks the server holds exactly what they left.
func TestConcurrentCallers(t *testing.T) {
	f := mountTest(t, Options{})
	const workers, files = 6, 60
	shared := f.path("shared")
	must(t, os.Mkdir(shared, 0o755))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range files {
				name := filepath.Join(shared, fmt.Sprintf("w%d-%03d", w, i))
				if err := os.WriteFile(name, nil, 0o644); err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					if err := os.Rename(name, name+".r"); err != nil {
						errs <- err
						return
					}
				}
				if i%5 == 0 {
					if _, err := os.ReadDir(shared); err != nil {
						errs <- err
						return
					}
				}
			}
			for i := 0; i < files; i += 2 {
				name := filepath.Join(shared, fmt.Sprintf("w%d-%03d", w, i))
				if i%3 == 0 {
					name += ".r"
				}
				if err := os.Remove(name); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ents, err := f.c.ReadDir(t.Context(), "/shared")
	must(t, err)
	if len(ents) != workers*files/2 {
		t.Errorf("server lists %d entries, want %d", len(ents), workers*files/2)
	}
	local, err := os.ReadDir(shared)
	must(t, err)
	if len(local) != len(ents) {
		t.Errorf("mount lists %d entries, server %d", len(local), len(ents))
	}
	// The kernel releases closed directories in the background.
	deadline := time.Now().Add(5 * time.Second)
	for f.m.FS.dirs.len() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := f.m.FS.dirs.len(); n != 0 {
		t.Errorf("%d directory handles still open 5 s after the last close", n)
	}
}

// TestCapabilityNegativeCache checks that the kernel's GETXATTR of
// security.capability before a write is answered by the mount for a file
// it created, and that a capability set through the mount is seen at
// once, and its removal too.
func TestCapabilityNegativeCache(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := mountTest(t, Options{Metrics: reg, AttrTimeout: time.Minute, EntryTimeout: time.Minute})
	hits := func() float64 {
		mfs, err := reg.Gather()
		must(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "canopy_fuse_xattr_negative_cache_hits_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no negative cache metric")
		return 0
	}
	p := f.path("f")
	must(t, os.WriteFile(p, []byte("hello"), 0o644))
	// Whether the kernel asks before a write depends on its version and
	// flags: the count is reported; the calls below are checked.
	h0 := hits()
	t.Logf("write of a new file: %v GETXATTRs answered by the mount", h0)
	buf := make([]byte, 64)
	_, err := unix.Getxattr(p, capabilityXattr, buf)
	wantErrno(t, "no capability", err, syscall.ENODATA)
	if h := hits(); h != h0+1 {
		t.Errorf("getxattr of a file the mount created: %v answers from the cache, want %v", h, h0+1)
	}
	// A version 2 capability set that grants nothing.
	caps := make([]byte, 20)
	binary.LittleEndian.PutUint32(caps, 0x02000000)
	must(t, unix.Setxattr(p, capabilityXattr, caps, 0))
	n, err := unix.Getxattr(p, capabilityXattr, buf)
	must(t, err)
	if n != len(caps) {
		t.Errorf("capability read back: %d bytes, want %d", n, len(caps))
	}
	if v, err := f.c.GetXattr(t.Context(), f.rel(p), capabilityXattr); err != nil || len(v) != len(caps) {
		t.Errorf("server: %d bytes, %v", len(v), err)
	}
	must(t, unix.Removexattr(p, capabilityXattr))
	_, err = unix.Getxattr(p, capabilityXattr, buf)
	wantErrno(t, "removed", err, syscall.ENODATA)
}

// TestNoCaps checks the negative cache's own rules.
func TestNoCaps(t *testing.T) {
	var off noCaps
	off.add(1)
	if off.has(1) {
		t.Error("a cache with no time to live kept an entry")
	}
	n := noCaps{ttl: time.Hour}
	n.add(1)
	if !n.has(1) || n.has(2) {
		t.Error("has after add")
	}
	n.drop(1)
	if n.has(1) {
		t.Error("has after drop")
	}
	for i := range maxNoCaps + 10 {
		n.add(client.Ino(i + 10))
	}
	if len(n.m) > maxNoCaps {
		t.Errorf("cache grew to %d entries, bound %d", len(n.m), maxNoCaps)
	}
}
