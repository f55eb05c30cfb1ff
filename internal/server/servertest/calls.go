package servertest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// CallsByMethod returns the calls a server registered on reg (its
// Config.Metrics) has answered so far, by method name, from its
// canopy_rpc_calls_total.
func CallsByMethod(t testing.TB, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "canopy_rpc_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
