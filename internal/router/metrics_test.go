package router

import (
	"testing"
)

// The router's metrics count what it did.
func TestMetrics(t *testing.T) {
	f := newFixture(t)
	ctx := testCtx(t)
	for range 10 {
		if _, err := f.c.Stat(ctx, "/deep"); err != nil {
			t.Fatal(err)
		}
	}
	families, err := f.r.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			switch {
			case m.GetHistogram() != nil:
				got[name] = float64(m.GetHistogram().GetSampleCount())
			case m.GetCounter() != nil:
				got[name] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[name] = m.GetGauge().GetValue()
			}
		}
	}
	for name, atLeast := range map[string]float64{
		"canopy_router_processing_seconds":      10,
		"canopy_router_partition_wait_seconds":  10,
		"canopy_router_parse_seconds":           10,
		"canopy_router_pool_wait_seconds":       10,
		"canopy_router_lookup_seconds":          10,
		"canopy_router_partition_calls_total/2": 10,
		"canopy_router_table_version":           1,
		"canopy_rpc_calls_total/RESOLVE/ok":     10,
	} {
		if got[name] < atLeast {
			t.Errorf("%s = %v, want at least %v", name, got[name], atLeast)
		}
	}
	for _, name := range []string{"canopy_router_queue_length/read", "canopy_router_queue_length/write"} {
		if _, ok := got[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	if t.Failed() {
		t.Logf("metrics: %v", got)
	}
}
