package router

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopyfs/canopy/internal/rpc"
)

// metrics are the router's Prometheus metrics, named canopy_router_*. The
// router's RPC server adds the canopy_rpc_* metrics to the same registry.
type metrics struct {
	busy          [2]prometheus.Counter // by rpc.Class
	processing    prometheus.Histogram
	partitionWait prometheus.Histogram
	parse         prometheus.Histogram
	poolWait      prometheus.Histogram
	lookup        prometheus.Histogram
	tableVersion  prometheus.Gauge
	partCalls     *prometheus.CounterVec
	partErrors    *prometheus.CounterVec
	sessionEnds   prometheus.Counter
}

// fastBuckets span 100 ns to about 100 ms.
var fastBuckets = prometheus.ExponentialBuckets(100e-9, 2.5, 16)

func newMetrics(reg *prometheus.Registry, inflight func(rpc.Class) float64) *metrics {
	if reg == nil {
		return nil
	}
	hist := func(name, help string) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: fastBuckets})
		reg.MustRegister(h)
		return h
	}
	m := &metrics{
		processing:    hist("canopy_router_processing_seconds", "Time from a call's arrival at the router to its reply."),
		partitionWait: hist("canopy_router_partition_wait_seconds", "Time from a call's forwarding to its partition's reply."),
		parse:         hist("canopy_router_parse_seconds", "Time spent reading and rewriting the routing fields of a call."),
		poolWait:      hist("canopy_router_pool_wait_seconds", "Time spent getting a partition connection and queueing a call on it."),
		lookup:        hist("canopy_router_lookup_seconds", "Time spent looking a path up in the mount table."),
		sessionEnds: prometheus.NewCounter(prometheus.CounterOpts{Name: "canopy_router_session_ends_total",
			Help: "Sessions of departed clients ended at a partition (SESSION_END), one per client and partition."}),
		tableVersion: prometheus.NewGauge(prometheus.GaugeOpts{Name: "canopy_router_table_version", Help: "Version of the mount and routing tables in use."}),
		partCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "canopy_router_partition_calls_total", Help: "Calls forwarded, by virtual partition."}, []string{"partition"}),
		partErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "canopy_router_partition_errors_total", Help: "Forwarded calls that failed to reach their partition or got a transport error, by virtual partition."}, []string{"partition"}),
	}
	busy := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "canopy_router_busy_refusals_total", Help: "Calls refused with BUSY, too many in flight, by class."}, []string{"class"})
	for _, cls := range []rpc.Class{rpc.ClassRead, rpc.ClassWrite} {
		m.busy[cls] = busy.WithLabelValues(cls.String())
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "canopy_router_queue_length", Help: "Calls in flight through the router, by class.",
			ConstLabels: prometheus.Labels{"class": cls.String()},
		}, func() float64 { return inflight(cls) }))
	}
	reg.MustRegister(m.tableVersion, m.partCalls, m.partErrors, m.sessionEnds, busy)
	return m
}

// epoch anchors monotime.
var epoch = time.Now()

// monotime returns monotonic nanoseconds since the process started.
func monotime() int64 { return int64(time.Since(epoch)) }

func seconds(ns int64) float64 { return float64(ns) / 1e9 }
