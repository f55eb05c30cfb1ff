package rpc

import (
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names are canopy_rpc_<name> on servers and
// canopy_rpc_client_<name> on clients.
const (
	metricsNamespace       = "canopy"
	metricsSubsystem       = "rpc"
	clientMetricsSubsystem = "rpc_client"
)

// Histogram buckets, in seconds.
var (
	// callBuckets covers a call's time in a queue or in processing: 10 µs
	// to about 10 s, ×4 per bucket.
	callBuckets = prometheus.ExponentialBuckets(10e-6, 4, 11)

	// codecBuckets covers encoding or decoding one frame: 250 ns to about
	// 1 s, ×4 per bucket.
	codecBuckets = prometheus.ExponentialBuckets(250e-9, 4, 12)

	// batchBuckets counts frames per socket write: 1 to 1024.
	batchBuckets = prometheus.ExponentialBuckets(1, 2, 11)
)

// Status classes, the values of the status label of
// canopy_rpc_calls_total.
const (
	statusOK = iota
	statusService
	statusBusy
	statusMalformed
	statusUnknownMethod
	statusShuttingDown
	statusInternal
	statusTransport
	numStatusClasses
)

var statusClassNames = [numStatusClasses]string{
	statusOK:            "ok",
	statusService:       "service_error",
	statusBusy:          "busy",
	statusMalformed:     "malformed",
	statusUnknownMethod: "unknown_method",
	statusShuttingDown:  "shutting_down",
	statusInternal:      "internal",
	statusTransport:     "transport_other",
}

// statusClass returns the class of a reply status.
func statusClass(status uint32) int {
	switch status {
	case StatusOK:
		return statusOK
	case StatusBusy:
		return statusBusy
	case StatusMalformed:
		return statusMalformed
	case StatusUnknownMethod:
		return statusUnknownMethod
	case StatusShuttingDown:
		return statusShuttingDown
	case StatusInternal:
		return statusInternal
	}
	if IsTransport(status) {
		return statusTransport
	}
	return statusService
}

// serverMetrics are a Server's Prometheus metrics. A nil *serverMetrics
// means the server has none, and every hot-path use checks for it.
//
// Per-method children are looked up in a two-level table of atomic pointers,
// filled the first time a method is seen, so that a call costs no map
// lookup and no allocation.
type serverMetrics struct {
	connections    prometheus.Gauge
	inflight       prometheus.Gauge
	readBytes      prometheus.Counter
	writtenBytes   prometheus.Counter
	framesPerWrite prometheus.Observer
	decode         prometheus.Observer
	encode         prometheus.Observer

	// Queue metrics, by Class; registered only with queues.
	busy         [numClasses]prometheus.Counter
	queueLen     [numClasses]prometheus.Gauge
	queueWait    [numClasses]prometheus.Observer
	handlersBusy prometheus.Gauge

	calls      *prometheus.CounterVec   // by method and status class
	processing *prometheus.HistogramVec // by method
	methodName func(uint16) string

	mu      sync.Mutex // held while filling methods
	methods [256]atomic.Pointer[methodPage]
}

// methodPage holds the metrics of 256 methods sharing their high byte.
type methodPage [256]atomic.Pointer[methodMetrics]

// methodMetrics are one method's label children.
type methodMetrics struct {
	processing prometheus.Observer
	calls      [numStatusClasses]prometheus.Counter
}

func newServerMetrics(reg prometheus.Registerer, queues bool, methodName func(uint16) string, log *slog.Logger) *serverMetrics {
	if reg == nil {
		return nil
	}
	r := registrar{reg: reg, log: log}
	m := &serverMetrics{methodName: methodName}
	m.connections = r.gauge("connections",
		"Client connections open on this server, including those still in their handshake.")
	m.inflight = r.gauge("calls_in_flight",
		"Calls received and not yet replied to: waiting in a queue or in a handler's hands.")
	m.readBytes = r.counter("read_bytes_total",
		"Bytes received from clients, as on the wire (after TLS and compression).")
	m.writtenBytes = r.counter("written_bytes_total",
		"Bytes sent to clients, as on the wire (after TLS and compression).")
	m.framesPerWrite = r.histogram("frames_per_write",
		"Reply frames sent per socket write. Above 1, replies finishing together share a system call.",
		batchBuckets)
	m.decode = r.histogram("decode_seconds",
		"Time to decode one received call frame, decompression included.", codecBuckets)
	m.encode = r.histogram("encode_seconds",
		"Time to encode one reply frame and queue it for writing, compression included.", codecBuckets)
	m.calls = register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "calls_total",
		Help: "Calls replied to, by method and status class: ok, service_error (a status of the service's own), " +
			"or the transport status (busy, malformed, unknown_method, shutting_down, internal, transport_other).",
	}, []string{"method", "status"}))
	m.processing = register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "processing_seconds",
		Help:    "Time from a call's frame being decoded to its reply being queued for writing, by method; queue time included.",
		Buckets: callBuckets,
	}, []string{"method"}))
	if queues {
		busy := register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "busy_refusals_total",
			Help: "Calls refused with StatusBusy because their queue was full, by queue (read or write). Clients retry them.",
		}, []string{"class"}))
		queueLen := register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "queue_length",
			Help: "Calls waiting in a queue for a handler, by queue (read or write).",
		}, []string{"class"}))
		queueWait := register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "queue_wait_seconds",
			Help:    "Time calls waited in their queue before a handler took them, by queue (read or write).",
			Buckets: callBuckets,
		}, []string{"class"}))
		for cls := range Class(numClasses) {
			m.busy[cls] = busy.WithLabelValues(cls.String())
			m.queueLen[cls] = queueLen.WithLabelValues(cls.String())
			m.queueWait[cls] = queueWait.WithLabelValues(cls.String())
		}
		m.handlersBusy = r.gauge("handlers_busy",
			"Handler goroutines serving a call. At the pool size, calls wait in the queues.")
	}
	return m
}

// method returns method's metrics, making them on first use.
func (m *serverMetrics) method(method uint16) *methodMetrics {
	if page := m.methods[method>>8].Load(); page != nil {
		if mm := page[method&0xff].Load(); mm != nil {
			return mm
		}
	}
	return m.newMethod(method)
}

func (m *serverMetrics) newMethod(method uint16) *methodMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	page := m.methods[method>>8].Load()
	if page == nil {
		page = new(methodPage)
		m.methods[method>>8].Store(page)
	}
	if mm := page[method&0xff].Load(); mm != nil {
		return mm
	}
	name := ""
	if m.methodName != nil {
		name = m.methodName(method)
	}
	if name == "" {
		name = strconv.Itoa(int(method))
	}
	mm := &methodMetrics{processing: m.processing.WithLabelValues(name)}
	for i, class := range statusClassNames {
		mm.calls[i] = m.calls.WithLabelValues(name, class)
	}
	page[method&0xff].Store(mm)
	return mm
}

// replied counts a reply to method with status, and returns the method's
// metrics for the caller to record the call's processing time in.
func (m *serverMetrics) replied(method uint16, status uint32) *methodMetrics {
	mm := m.method(method)
	mm.calls[statusClass(status)].Inc()
	m.inflight.Dec()
	return mm
}

// clientMetrics are a Client's Prometheus metrics; nil means none.
type clientMetrics struct {
	retries    prometheus.Counter
	busy       prometheus.Counter
	reconnects prometheus.Counter
}

func newClientMetrics(reg prometheus.Registerer, log *slog.Logger) *clientMetrics {
	if reg == nil {
		return nil
	}
	r := registrar{reg: reg, log: log, subsystem: clientMetricsSubsystem}
	return &clientMetrics{
		retries: r.counter("retries_total",
			"Calls sent again: after StatusBusy or StatusShuttingDown, a lost connection or an attempt timing out."),
		busy: r.counter("busy_total",
			"StatusBusy replies received: the server's queue was full. Each is retried while retries and time last."),
		reconnects: r.counter("reconnects_total",
			"Connections dialed again after the previous one broke or was closed by the server."),
	}
}

// registrar registers collectors, tolerating a collector that is already
// registered: two Servers (or Clients) sharing a registerer share their
// metrics, which then add up.
type registrar struct {
	reg       prometheus.Registerer
	log       *slog.Logger
	subsystem string // default metricsSubsystem
}

func (r registrar) opts(name, help string) prometheus.Opts {
	sub := r.subsystem
	if sub == "" {
		sub = metricsSubsystem
	}
	return prometheus.Opts{Namespace: metricsNamespace, Subsystem: sub, Name: name, Help: help}
}

func (r registrar) gauge(name, help string) prometheus.Gauge {
	return register(r, prometheus.NewGauge(prometheus.GaugeOpts(r.opts(name, help))))
}

func (r registrar) counter(name, help string) prometheus.Counter {
	return register(r, prometheus.NewCounter(prometheus.CounterOpts(r.opts(name, help))))
}

func (r registrar) histogram(name, help string, buckets []float64) prometheus.Histogram {
	o := r.opts(name, help)
	return register(r, prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: o.Namespace, Subsystem: o.Subsystem, Name: o.Name, Help: o.Help, Buckets: buckets,
	}))
}

// register registers c, or returns the equal collector already registered.
// If c cannot be registered at all, it is logged and returned unregistered:
// metrics must never stop the server.
func register[C prometheus.Collector](r registrar, c C) C {
	err := r.reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	r.log.Error("rpc metric not registered; it will not be exported", "err", err)
	return c
}

// seconds converts nanoseconds to seconds.
func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// countingConn counts the bytes read from and written to a connection, as
// they cross the socket. Both its goroutines (reader and writer) use it.
type countingConn struct {
	net.Conn
	read, written prometheus.Counter
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.read.Add(float64(n))
	}
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.written.Add(float64(n))
	}
	return n, err
}
