package fuse

import (
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
)

// The FUSE operations the mount counts, as metric labels.
const (
	opLookup      = "lookup"
	opGetattr     = "getattr"
	opSetattr     = "setattr"
	opMknod       = "mknod"
	opMkdir       = "mkdir"
	opUnlink      = "unlink"
	opRmdir       = "rmdir"
	opRename      = "rename"
	opLink        = "link"
	opSymlink     = "symlink"
	opReadlink    = "readlink"
	opAccess      = "access"
	opGetxattr    = "getxattr"
	opListxattr   = "listxattr"
	opSetxattr    = "setxattr"
	opRemovexattr = "removexattr"
	opCreate      = "create"
	opOpen        = "open"
	opRead        = "read"
	opWrite       = "write"
	opFlush       = "flush"
	opFsync       = "fsync"
	opRelease     = "release"
	opOpendir     = "opendir"
	opReaddir     = "readdir"
	opReaddirplus = "readdirplus"
	opStatfs      = "statfs"
	opGetlk       = "getlk"
	opSetlk       = "setlk"
	opSetlkw      = "setlkw"
	opFallocate   = "fallocate"
)

// latencyBuckets span 1 µs to about 4 s.
var latencyBuckets = prometheus.ExponentialBuckets(1e-6, 2, 23)

// metrics counts FUSE operations by result and times them. The
// collectors are safe for use from any goroutine; nil means no metrics.
type metrics struct {
	ops     *prometheus.CounterVec
	seconds *prometheus.HistogramVec
	// noCapsHits counts GETXATTRs of security.capability answered from
	// the mount's negative cache, without a call to the service.
	noCapsHits prometheus.Counter
	// dirAttrHits counts GETATTRs of a directory answered from a
	// create's reply (dirattrs.go).
	dirAttrHits prometheus.Counter
	// freshHits counts LOOKUPs answered ENOENT in a directory this mount
	// made moments ago (fresh.go).
	freshHits prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "canopy_fuse_operations_total",
			Help: "FUSE requests the mount answered, by operation and result (ok or the errno name).",
		}, []string{"op", "result"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "canopy_fuse_operation_seconds", Buckets: latencyBuckets,
			Help: "Time from a FUSE request reaching the mount to its answer, by operation.",
		}, []string{"op"}),
		noCapsHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "canopy_fuse_xattr_negative_cache_hits_total",
			Help: "GETXATTRs of security.capability answered ENODATA by the mount from what it knows, without asking the service.",
		}),
		dirAttrHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "canopy_fuse_dir_attr_hits_total",
			Help: "GETATTRs of a directory answered by the mount from the attributes a create's reply carried, without asking the service.",
		}),
		freshHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "canopy_fuse_fresh_lookup_hits_total",
			Help: "LOOKUPs of a name absent from a directory this mount made within the negative timeout, answered by the mount without asking the service.",
		}),
	}
	reg.MustRegister(m.ops, m.seconds, m.noCapsHits, m.dirAttrHits, m.freshHits)
	return m
}

// registerCacheMetrics publishes the block cache counters of c's data
// volume (zero until a file is read or written).
func registerCacheMetrics(reg prometheus.Registerer, c *client.Client) {
	if reg == nil {
		return
	}
	stat := func(pick func(client.CacheStats) float64) func() float64 {
		return func() float64 {
			s, _ := c.CacheStats()
			return pick(s)
		}
	}
	counters := []struct {
		name, help string
		pick       func(client.CacheStats) float64
	}{
		{"canopy_fuse_block_cache_hits_total", "File data reads served by a block already in the mount's cache (or already coming).",
			func(s client.CacheStats) float64 { return float64(s.Hits) }},
		{"canopy_fuse_block_cache_misses_total", "File data reads that had to download a block from the object store.",
			func(s client.CacheStats) float64 { return float64(s.Misses) }},
		{"canopy_fuse_block_cache_prefetches_total", "Blocks downloaded ahead of reads (readahead).",
			func(s client.CacheStats) float64 { return float64(s.Prefetches) }},
		{"canopy_fuse_block_cache_fetched_bytes_total", "Bytes downloaded from the object store into the block cache.",
			func(s client.CacheStats) float64 { return float64(s.FetchedBytes) }},
	}
	for _, k := range counters {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: k.name, Help: k.help}, stat(k.pick)))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "canopy_fuse_block_cache_bytes", Help: "Bytes of file data the mount's block cache holds.",
	}, stat(func(s client.CacheStats) float64 { return float64(s.Bytes) })))
	disk := func(pick func(client.DiskCacheStats) float64) func() float64 {
		return func() float64 {
			s, _ := c.DiskCacheStats()
			return pick(s)
		}
	}
	diskCounters := []struct {
		name, help string
		pick       func(client.DiskCacheStats) float64
	}{
		{"canopy_fuse_disk_cache_hits_total", "Blocks read from the on-disk cache (--cache-dir).",
			func(s client.DiskCacheStats) float64 { return float64(s.Hits) }},
		{"canopy_fuse_disk_cache_misses_total", "Blocks the on-disk cache did not have.",
			func(s client.DiskCacheStats) float64 { return float64(s.Misses) }},
		{"canopy_fuse_disk_cache_torn_total", "On-disk cache entries found damaged (length, magic or checksum) and removed, never served.",
			func(s client.DiskCacheStats) float64 { return float64(s.Torn) }},
		{"canopy_fuse_disk_cache_evicted_total", "On-disk cache entries removed to stay under --cache-size.",
			func(s client.DiskCacheStats) float64 { return float64(s.Evicted) }},
	}
	for _, k := range diskCounters {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: k.name, Help: k.help}, disk(k.pick)))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "canopy_fuse_disk_cache_bytes", Help: "Bytes the on-disk cache's entries take (--cache-dir).",
	}, disk(func(s client.DiskCacheStats) float64 { return float64(s.Bytes) })))
}

// done records one operation that started at start and ended with st.
func (m *metrics) done(op string, start time.Time, st gofuse.Status) {
	if m == nil {
		return
	}
	m.seconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
	m.ops.WithLabelValues(op, resultName(st)).Inc()
}

// noCapsHit records a GETXATTR answered from the negative cache.
func (m *metrics) noCapsHit() {
	if m != nil {
		m.noCapsHits.Inc()
	}
}

// dirAttrHit records a GETATTR answered from a create's reply.
func (m *metrics) dirAttrHit() {
	if m != nil {
		m.dirAttrHits.Inc()
	}
}

// freshHit records a LOOKUP answered from a fresh directory.
func (m *metrics) freshHit() {
	if m != nil {
		m.freshHits.Inc()
	}
}

// resultName is "ok" or the errno's name ("ENOENT").
func resultName(st gofuse.Status) string {
	if st == gofuse.OK {
		return "ok"
	}
	if name := unix.ErrnoName(syscall.Errno(st)); name != "" {
		return name
	}
	return "other"
}
