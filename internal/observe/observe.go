// Package observe serves what an operator looks at on a running Canopy
// process over HTTP: Prometheus metrics at /metrics, Go profiles at
// /debug/pprof/, the status at /status.json and a console at / (console.go).
package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
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
	stop chan struct{} // closed by Close: ends the console's sampler
	once sync.Once
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops the endpoint.
func (s *Server) Close() error {
	s.once.Do(func() { close(s.stop) })
	return s.http.Close()
}

// statusMap flattens what status returns to its JSON object's fields,
// for the console's table.
func statusMap(status func() any) map[string]any {
	out := map[string]any{}
	if status == nil {
		return out
	}
	b, err := json.Marshal(status())
	if err != nil {
		return out
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return out
	}
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			for k2, v2 := range sub {
				out[k+"."+k2] = v2
			}
			continue
		}
		out[k] = v
	}
	return out
}

// Serve listens on addr and serves reg's metrics, pprof, what status
// returns (encoded as JSON) at /status.json, and the console (console.go)
// at /, until Close.
func Serve(addr string, reg *prometheus.Registry, status func() any, log *slog.Logger) (*Server, error) {
	return serve(addr, reg, status, log, sampleEvery)
}

func serve(addr string, reg *prometheus.Registry, status func() any, log *slog.Logger, every time.Duration) (*Server, error) {
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
	mux.HandleFunc("/status.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var v any = map[string]any{}
		if status != nil {
			v = status()
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(v)
	})
	smp := newSampler(reg)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		smp.page(w, statusMap(status))
	})
	s := &Server{
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr(),
		stop: make(chan struct{}),
	}
	go smp.run(every, s.stop)
	go func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "addr", ln.Addr(), "err", err)
		}
	}()
	return s, nil
}
