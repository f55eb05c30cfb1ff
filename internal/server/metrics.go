package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus metrics. The collectors are safe for
// use from any goroutine; the apply loop and the committer update them.
type metrics struct {
	batchOps       prometheus.Histogram
	applySeconds   prometheus.Histogram
	commitSeconds  prometheus.Histogram
	recordsPerSync prometheus.Histogram
	ckptSeconds    prometheus.Histogram
	ckptPause      prometheus.Histogram
	idleSeconds    prometheus.Histogram
	idleWork       prometheus.Counter
	busy           *prometheus.CounterVec
}

// latencyBuckets span 1 µs to about 4 s.
var latencyBuckets = prometheus.ExponentialBuckets(1e-6, 2, 23)

// pauseBuckets span 100 µs to 10 s, in steps of 1, 2.5 and 5.
var pauseBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// countBuckets span 1 to 4096.
var countBuckets = prometheus.ExponentialBuckets(1, 2, 13)

func newMetrics(s *Server, sm *stateMachine, reg prometheus.Registerer) *metrics {
	m := &metrics{
		batchOps: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_meta_batch_operations", Buckets: countBuckets,
			Help: "Operations the apply loop took from the queues in one batch. Large batches mean the queues are filling.",
		}),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_meta_apply_seconds", Buckets: latencyBuckets,
			Help: "Time the apply loop spent applying one batch to the namespace (the single-threaded part of every call).",
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_meta_log_commit_seconds", Buckets: latencyBuckets,
			Help: "Time to append one batch's log records and fsync them; every mutation's reply waits for this.",
		}),
		recordsPerSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_meta_log_records_per_sync", Buckets: countBuckets,
			Help: "Mutations made durable by one fsync (group commit at work when above 1).",
		}),
		ckptSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_meta_checkpoint_encode_seconds", Buckets: latencyBuckets,
			Help: "Time the checkpointer spent encoding a checkpoint of the namespace, off the apply loop.",
		}),
		ckptPause: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_meta_checkpoint_pause_seconds", Buckets: pauseBuckets,
			Help: "Time the apply loop was held taking a checkpoint: freezing the namespace and copying the retry cache.",
		}),
		idleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_meta_idle_step_seconds", Buckets: latencyBuckets,
			Help: "Time one step of the idle sweep (packing idle directories) held the apply loop; it runs only when both queues are empty.",
		}),
		idleWork: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "canopy_meta_idle_work_total",
			Help: "Work done by the idle sweep: directories visited plus entries packed.",
		}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "canopy_meta_busy_refusals_total",
			Help: "Calls refused with BUSY because their queue (read or write) was full.",
		}, []string{"class"}),
	}
	if reg == nil {
		return m
	}
	reg.MustRegister(m.batchOps, m.applySeconds, m.commitSeconds, m.recordsPerSync, m.ckptSeconds, m.ckptPause, m.idleSeconds, m.idleWork, m.busy)
	for class, q := range map[string]chan *op{"read": s.reads, "write": s.writes} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "canopy_meta_queue_length", ConstLabels: prometheus.Labels{"class": class},
			Help: "Operations waiting for the apply loop, by class.",
		}, func() float64 { return float64(len(q)) }))
	}
	counters := []struct {
		name, help string
		value      func() uint64
	}{
		{"canopy_meta_log_syncs_total", "Fsyncs of the transaction log.", s.stats.syncs.Load},
		{"canopy_meta_log_records_total", "Mutations written to the transaction log.", s.stats.records.Load},
		{"canopy_meta_retry_cache_hits_total", "Retried mutations answered from the retry cache instead of being applied again.", sm.retryHits.Load},
		{"canopy_meta_dir_inflations_total", "Packed directories inflated because an operation used them.", s.stats.inflated.Load},
	}
	for _, c := range counters {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(c.value()) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "canopy_meta_inodes",
		Help: "Nodes in the partition's namespace (files, directories, symlinks, the root).",
	}, func() float64 { return float64(s.stats.inodes.Load()) }))
	gauges := []struct {
		name, help string
		value      func() int64
	}{
		{"canopy_meta_garbage_slices", "Slices no file uses whose objects the collector has not purged yet.", s.stats.garbage.Load},
		{"canopy_meta_open_files", "Files open by clients (opens counted once per file).", s.stats.openFiles.Load},
		{"canopy_meta_orphans", "Files kept open after their last link went.", s.stats.orphans.Load},
		{"canopy_meta_packed_dirs", "Directories the idle sweep holds compressed.", s.stats.packed.Load},
		{"canopy_meta_checkpoint_busy", "1 while a checkpoint is being encoded or written (its frozen view holds what the partition changes meanwhile), else 0.", func() int64 {
			if s.ckptBusy.Load() {
				return 1
			}
			return 0
		}},
		{"canopy_meta_idle_sweep_busy", "1 while the idle sweep has directories left to visit or pack, 0 once a whole round found nothing to do.", s.stats.sweeping.Load},
		{"canopy_meta_file_locks", "File locks held (POSIX ranges and flocks).", func() int64 { l, _, _ := s.locks.Stats(); return int64(l) }},
		{"canopy_meta_lock_waits", "SETLKW calls waiting for a lock.", func() int64 { _, w, _ := s.locks.Stats(); return int64(w) }},
	}
	for _, g := range gauges {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help},
			func() float64 { return float64(g.value()) }))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "canopy_meta_lock_sessions_expired_total",
		Help: "Clients that lost their file locks by staying silent past the lock timeout.",
	}, func() float64 { _, _, n := s.locks.Stats(); return float64(n) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "canopy_meta_log_lsn",
		Help: "Sequence number of the last record written to the transaction log.",
	}, func() float64 { return float64(s.stats.lsn.Load()) }))
	return m
}

func since(start time.Time) float64 { return time.Since(start).Seconds() }
