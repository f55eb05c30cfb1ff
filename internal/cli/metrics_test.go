package cli

import (
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/canopyfs/canopy/internal/observe"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// serveWithMetrics starts a metadata server with a metrics endpoint, both
// stopped when the test ends, and returns their addresses.
func serveWithMetrics(t *testing.T) (addr, metricsAddr string) {
	t.Helper()
	reg := observe.NewRegistry()
	s, addr := servertest.Start(t, server.Config{Metrics: reg})
	obs, err := observe.Serve("127.0.0.1:0", reg, func() any { return s.Status() }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close() })
	return addr, obs.Addr().String()
}

// scrape reads the metrics endpoint and returns the value of the first
// series matching each pattern, failing the test if one is missing.
func scrape(t *testing.T, addr string, patterns ...string) []float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := make([]float64, len(patterns))
	for i, p := range patterns {
		m := regexp.MustCompile(`(?m)^` + p + ` ([0-9.e+-]+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("no series %s in /metrics:\n%s", p, body)
		}
		out[i], _ = strconv.ParseFloat(string(m[1]), 64)
	}
	return out
}

// TestMetricsMoveUnderBench serves a metadata server with its metrics
// endpoint, runs `canopy bench rpc` and `canopy bench meta` against it,
// and checks that the call, latency, queue and batch metrics moved.
func TestMetricsMoveUnderBench(t *testing.T) {
	addr, metricsAddr := serveWithMetrics(t)

	series := []string{
		`canopy_rpc_calls_total\{method="null",status="ok"\}`,
		`canopy_rpc_processing_seconds_count\{method="null"\}`,
		`canopy_meta_batch_operations_count`,
		`canopy_meta_apply_seconds_count`,
		`canopy_meta_queue_length\{class="read"\}`,
		`canopy_rpc_connections`,
	}
	mustCanopy(t, addr, "bench", "rpc", "--clients", "8", "--duration", "300ms", "--warmup", "0s", "--rounds", "1", "--ceiling-time", "0s", "--json")
	mustCanopy(t, addr, "bench", "meta", "--op", "stat", "--threads", "8", "--files", "50", "--duration", "300ms", "--warmup", "0s", "--rounds", "1", "--ceiling-time", "0s", "--json")
	got := scrape(t, metricsAddr, series...)
	// The queue-length gauge and connection count need only be present
	// (scrape fails otherwise); the counters must have moved.
	for i, name := range series[:4] {
		if got[i] <= 0 {
			t.Errorf("%s = %v after the benchmarks, want > 0", name, got[i])
		}
	}
	nulls := got[0]
	mustCanopy(t, addr, "bench", "rpc", "--clients", "4", "--duration", "200ms", "--warmup", "0s", "--rounds", "1", "--ceiling-time", "0s", "--json")
	if after := scrape(t, metricsAddr, series[0])[0]; after <= nulls {
		t.Errorf("null calls counter did not move: %v then %v", nulls, after)
	}
	resp, err := http.Get("http://" + metricsAddr + "/debug/pprof/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("pprof index: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}
