package replica

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 18) // 50µs .. 6.5s
	countBuckets   = prometheus.ExponentialBuckets(1, 2, 14)     // 1 .. 8192
	sizeBuckets    = prometheus.ExponentialBuckets(4<<10, 4, 12) // 4 KiB .. 16 GiB
)

// metrics are a Node's Prometheus metrics. They are written on the raft
// goroutine (the snapshot goroutine writes the snapshot-send ones, the
// syncer the append and fsync ones) and read by the scraper.
type metrics struct {
	term          prometheus.Gauge
	leaderChanges prometheus.Counter
	proposals     prometheus.Counter
	commit        prometheus.Histogram
	appendSync    prometheus.Histogram
	fsync         prometheus.Histogram
	entriesPer    prometheus.Histogram
	perEntry      prometheus.Histogram
	leaseReads    prometheus.Counter
	snapBytes     prometheus.Histogram
	snapSeconds   *prometheus.HistogramVec
	followerLag   *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer, id uint64) (*metrics, error) {
	labels := prometheus.Labels{"replica": strconv.FormatUint(id, 10)}
	m := &metrics{
		term: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "canopy_replica_term", Help: "Current Raft term.", ConstLabels: labels}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "canopy_replica_leader_changes_total", Help: "Times the known leader changed.", ConstLabels: labels}),
		proposals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "canopy_replica_proposals_total", Help: "Proposals made at this replica.", ConstLabels: labels}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_replica_commit_seconds", Help: "From proposal to applied, at the proposing leader.",
			Buckets: latencyBuckets, ConstLabels: labels}),
		appendSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_replica_append_sync_seconds", Help: "From the write of the entries to the end of the fsync that made them durable (one fsync covers every append waiting).",
			Buckets: latencyBuckets, ConstLabels: labels}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_replica_fsync_seconds", Help: "One fsync of the log by the syncer, alone (the disk's share of append_sync).",
			Buckets: latencyBuckets, ConstLabels: labels}),
		entriesPer: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_replica_entries_per_append", Help: "Entries made durable by one fsync.",
			Buckets: countBuckets, ConstLabels: labels}),
		perEntry: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_replica_proposals_per_entry", Help: "Proposals carried by one Raft entry, at the proposing leader.",
			Buckets: countBuckets, ConstLabels: labels}),
		leaseReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "canopy_replica_lease_reads_total", Help: "Read batches the leader answered under its lease, without a ReadIndex round.", ConstLabels: labels}),
		snapBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "canopy_replica_snapshot_bytes", Help: "Size of snapshots taken, sent and received.",
			Buckets: sizeBuckets, ConstLabels: labels}),
		snapSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "canopy_replica_snapshot_seconds", Help: "Time to take, send, or install a snapshot.",
			Buckets: latencyBuckets, ConstLabels: labels}, []string{"op"}),
		followerLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "canopy_replica_follower_lag_entries", Help: "At the leader: entries a follower lacks.",
			ConstLabels: labels}, []string{"follower"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.term, m.leaderChanges, m.proposals, m.commit,
			m.appendSync, m.fsync, m.entriesPer, m.perEntry, m.leaseReads, m.snapBytes, m.snapSeconds, m.followerLag} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register replica metrics: %w", err)
			}
		}
	}
	return m, nil
}
