// Package observe serves what an operator looks at on a running Canopy
// process over HTTP: Prometheus metrics at /metrics, Go profiles at
// /debug/pprof/, and a small status page at /.
package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a metrics registry holding the process's own
// collectors (resident memory, CPU, file descriptors, Go runtime).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	)
	return reg
}

// Server is a running observability endpoint.
type Server struct {
	http *http.Server
	addr net.Addr
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops the endpoint.
func (s *Server) Close() error { return s.http.Close() }

// Serve listens on addr and serves reg's metrics, pprof, and a status
// page showing what status returns (encoded as JSON) until Close.
func Serve(addr string, reg *prometheus.Registry, status func() any, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "canopy: /metrics (Prometheus), /debug/pprof/ (profiles)")
		if status != nil {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			enc.Encode(status())
		}
	})
	s := &Server{
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr(),
	}
	go func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "addr", ln.Addr(), "err", err)
		}
	}()
	return s, nil
}
