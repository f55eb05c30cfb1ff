package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/canopyfs/canopy/internal/gateway"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := gateway.NewMetrics(reg, "test")
	h := m.Handler(func(r *http.Request) string { return "Op" + r.Method }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusCreated)
		}
		w.Write(append(b, '!'))
	}))
	for _, method := range []string{http.MethodPut, http.MethodPut, http.MethodGet} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/x", strings.NewReader("abcd")))
	}
	want := `
# HELP canopy_gateway_requests_total Requests served, by operation and HTTP status.
# TYPE canopy_gateway_requests_total counter
canopy_gateway_requests_total{gateway="test",op="OpGET",status="200"} 1
canopy_gateway_requests_total{gateway="test",op="OpPUT",status="201"} 2
# HELP canopy_gateway_bytes_total Bytes of request bodies read (in) and response bodies written (out).
# TYPE canopy_gateway_bytes_total counter
canopy_gateway_bytes_total{direction="in",gateway="test"} 12
canopy_gateway_bytes_total{direction="out",gateway="test"} 15
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "canopy_gateway_requests_total", "canopy_gateway_bytes_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "canopy_gateway_request_seconds"); n != 2 {
		t.Fatalf("latency series: %d, want 2", n)
	}
}
