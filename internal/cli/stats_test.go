package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

func TestParseTotals(t *testing.T) {
	in := `# HELP canopy_rpc_calls_total Calls.
# TYPE canopy_rpc_calls_total counter
canopy_rpc_calls_total{method="getattr",status="ok"} 10
canopy_rpc_calls_total{method="lookup",status="ok"} 5
canopy_rpc_calls_total{method="lookup",status="service_error"} 2
canopy_meta_inodes 7
canopy_rpc_processing_seconds_sum{method="x"} 0.5
canopy_rpc_processing_seconds_count{method="x"} 4
`
	m, err := parseTotals(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if m["canopy_rpc_calls_total"] != 17 || m["canopy_rpc_calls_total:errors"] != 2 || m["canopy_meta_inodes"] != 7 {
		t.Errorf("totals %v", m)
	}
	b := map[string]float64{"canopy_rpc_calls_total": 37, "canopy_rpc_processing_seconds_sum": 1.5, "canopy_rpc_processing_seconds_count": 8, "canopy_meta_inodes": 9}
	l := statsBetween(m, b, 2, time.Unix(0, 0))
	if l.Ops != 10 || l.LatencyMs != 250 || l.Inodes != 9 {
		t.Errorf("line %+v", l)
	}
}

func TestStatsMoveUnderLoad(t *testing.T) {
	addr, metricsAddr := serveWithMetrics(t)
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			c.Create(ctx, fmt.Sprintf("/f%d", i), 0o644)
		}
	}()
	out := mustCanopy(t, addr, "stats", "--metrics", metricsAddr, "--interval", "300ms", "--count", "3", "--json")
	stop()
	<-done
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	var last statsLine
	for _, l := range lines {
		var s statsLine
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		if s.Ops <= 0 || s.Mutations <= 0 || s.InBytes <= 0 || s.OutBytes <= 0 || s.LatencyMs <= 0 {
			t.Errorf("a line under load with counters that did not move: %+v", s)
		}
		if s.Inodes < last.Inodes {
			t.Errorf("inodes went down: %v then %v", last.Inodes, s.Inodes)
		}
		last = s
	}
	if last.Inodes < 2 {
		t.Errorf("inodes %v", last.Inodes)
	}
	text := mustCanopy(t, addr, "stats", "--metrics", metricsAddr, "--interval", "100ms", "--count", "1")
	if !strings.Contains(text, "ops/s") || len(strings.Split(strings.TrimSpace(text), "\n")) != 2 {
		t.Errorf("text output:\n%s", text)
	}
}
