// Package gateway holds what Canopy's protocol gateways (S3 and WebDAV,
// in the packages below it) share: Prometheus metrics of the requests they
// serve, kept by an HTTP middleware.
package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts a gateway's requests by operation and status, the bytes
// they carried and their latency. Its collectors are safe for concurrent
// use by every request goroutine.
type Metrics struct {
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the metrics of the gateway named name ("s3",
// "webdav") in reg. A nil reg gives metrics that are kept but not exported.
func NewMetrics(reg prometheus.Registerer, name string) *Metrics {
	labels := prometheus.Labels{"gateway": name}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "canopy", Subsystem: "gateway", Name: "requests_total",
			Help: "Requests served, by operation and HTTP status.", ConstLabels: labels,
		}, []string{"op", "status"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "canopy", Subsystem: "gateway", Name: "bytes_total",
			Help: "Bytes of request bodies read (in) and response bodies written (out).", ConstLabels: labels,
		}, []string{"direction"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "canopy", Subsystem: "gateway", Name: "request_seconds",
			Help: "Time from a request's arrival to the end of its response, by operation.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"op"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.bytes, m.latency)
	}
	return m
}

// Handler wraps next so that every request is counted under the operation
// op names for it.
func (m *Metrics) Handler(op func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		name := op(r)
		body := &countingBody{rc: r.Body}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = body
		}
		rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rw, r)
		m.Observe(name, rw.status, body.n, rw.n, time.Since(start))
	})
}

// Observe counts one request of operation op that ended with status,
// having read in bytes of its body and written out bytes of its answer,
// after elapsed.
func (m *Metrics) Observe(op string, status int, in, out int64, elapsed time.Duration) {
	m.requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
	m.bytes.WithLabelValues("in").Add(float64(in))
	m.bytes.WithLabelValues("out").Add(float64(out))
	m.latency.WithLabelValues(op).Observe(elapsed.Seconds())
}

// countingBody counts the bytes read from a request body.
type countingBody struct {
	rc interface {
		Read([]byte) (int, error)
		Close() error
	}
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n += int64(n)
	return n, err
}

func (b *countingBody) Close() error { return b.rc.Close() }

// statusWriter records the status and the bytes of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	n      int64
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wrote = true
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush through, for handlers that stream.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
