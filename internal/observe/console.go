package observe

import (
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The console: an HTML overview at / drawn on the server, with inline
// SVG charts and no scripts. A sampler goroutine gathers the registry
// every sampleEvery and keeps the last hour of samples; the page reads
// them under the sampler's lock.

const (
	sampleEvery = 10 * time.Second
	keepSamples = 360 // an hour at sampleEvery
)

// sample is one point of the console's charts.
type sample struct {
	at        time.Time
	ops       float64 // calls (or FUSE operations) per second since the previous sample
	latencyMs float64 // their mean latency
}

// methodLatency is one method's mean latency over the last interval.
type methodLatency struct {
	Method string
	Calls  float64
	MeanMs float64
}

// sampler gathers reg periodically. Its goroutine writes, page handlers
// read; mu guards all but reg.
type sampler struct {
	reg *prometheus.Registry

	mu       sync.Mutex
	samples  []sample
	lastOps  float64 // counter totals at the last gather
	lastSum  float64
	lastCnt  float64
	byMethod map[string][2]float64 // per method: sum, count at the last gather
	slowest  []methodLatency       // over the last interval, slowest first
	gauges   map[string]float64
}

func newSampler(reg *prometheus.Registry) *sampler {
	return &sampler{reg: reg, byMethod: map[string][2]float64{}, gauges: map[string]float64{}}
}

// run samples every period until stop is closed.
func (s *sampler) run(period time.Duration, stop <-chan struct{}) {
	s.gather(time.Now())
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			s.gather(now)
		}
	}
}

// opsFamilies are the counters and histograms the charts follow, the
// first present of each list: a server's or router's RPC calls, or a
// mount's FUSE operations.
var (
	opsCounters = []string{"canopy_rpc_calls_total", "canopy_fuse_operations_total"}
	latencyHist = []string{"canopy_rpc_processing_seconds", "canopy_fuse_operation_seconds"}
)

func (s *sampler) gather(now time.Time) {
	fams, err := s.reg.Gather()
	if err != nil && len(fams) == 0 {
		return
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	var ops, sum, cnt float64
	for _, n := range opsCounters {
		if f := byName[n]; f != nil {
			for _, m := range f.Metric {
				ops += m.GetCounter().GetValue()
			}
			break
		}
	}
	methods := map[string][2]float64{}
	for _, n := range latencyHist {
		if f := byName[n]; f != nil {
			for _, m := range f.Metric {
				h := m.GetHistogram()
				sum += h.GetSampleSum()
				cnt += float64(h.GetSampleCount())
				key := labelValue(m, "method", "op")
				v := methods[key]
				methods[key] = [2]float64{v[0] + h.GetSampleSum(), v[1] + float64(h.GetSampleCount())}
			}
			break
		}
	}
	gauges := map[string]float64{}
	for _, n := range []string{"process_resident_memory_bytes", "canopy_meta_inodes", "canopy_meta_log_lsn", "canopy_fuse_block_cache_bytes"} {
		if f := byName[n]; f != nil {
			for _, m := range f.Metric {
				gauges[n] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) > 0 {
		prev := s.samples[len(s.samples)-1].at
		dt := now.Sub(prev).Seconds()
		p := sample{at: now}
		if dt > 0 && ops >= s.lastOps {
			p.ops = (ops - s.lastOps) / dt
		}
		if d := cnt - s.lastCnt; d > 0 {
			p.latencyMs = 1000 * (sum - s.lastSum) / d
		}
		s.samples = append(s.samples, p)
		if len(s.samples) > keepSamples {
			s.samples = slices.Delete(s.samples, 0, len(s.samples)-keepSamples)
		}
		var slow []methodLatency
		for k, v := range methods {
			old := s.byMethod[k]
			if d := v[1] - old[1]; d > 0 {
				slow = append(slow, methodLatency{Method: k, Calls: d, MeanMs: 1000 * (v[0] - old[0]) / d})
			}
		}
		slices.SortFunc(slow, func(a, b methodLatency) int {
			switch {
			case a.MeanMs > b.MeanMs:
				return -1
			case a.MeanMs < b.MeanMs:
				return 1
			}
			return strings.Compare(a.Method, b.Method)
		})
		s.slowest = slow[:min(len(slow), 10)]
	} else {
		s.samples = append(s.samples, sample{at: now})
	}
	s.lastOps, s.lastSum, s.lastCnt, s.byMethod, s.gauges = ops, sum, cnt, methods, gauges
}

func labelValue(m *dto.Metric, names ...string) string {
	for _, l := range m.Label {
		if slices.Contains(names, l.GetName()) {
			return l.GetValue()
		}
	}
	return "all"
}

// chart is an inline SVG line chart of values.
func chart(title, unit string, values []float64) template.HTML {
	const w, h, pad = 600.0, 140.0, 4.0
	top := 0.0
	for _, v := range values {
		top = max(top, v)
	}
	if top == 0 {
		top = 1
	}
	var pts strings.Builder
	for i, v := range values {
		x := pad
		if len(values) > 1 {
			x = pad + (w-2*pad)*float64(i)/float64(len(values)-1)
		}
		y := h - pad - (h-2*pad)*v/top
		fmt.Fprintf(&pts, "%.1f,%.1f ", x, y)
	}
	last := 0.0
	if len(values) > 0 {
		last = values[len(values)-1]
	}
	return template.HTML(fmt.Sprintf(`<figure><figcaption>%s: %s %s now, peak %s</figcaption>`+
		`<svg class="chart" role="img" aria-label="%s" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+
		`<rect x="0" y="0" width="%.0f" height="%.0f" fill="#f7f7f7" stroke="#ccc"/>`+
		`<polyline fill="none" stroke="#2a6fbb" stroke-width="2" points="%s"/></svg></figure>`,
		template.HTMLEscapeString(title), num(last), template.HTMLEscapeString(unit), num(top),
		template.HTMLEscapeString(title), w, h, w, h, w, h, strings.TrimSpace(pts.String())))
}

func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// consoleData is what the page template shows.
type consoleData struct {
	Now          string
	OpsChart     template.HTML
	LatencyChart template.HTML
	Samples      int
	Resident     string
	Inodes       float64
	PerFile      string
	LSN          float64
	Slowest      []methodLatency
	Status       []kv
}

type kv struct{ Key, Value string }

var consoleTmpl = template.Must(template.New("console").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Canopy console</title>
<style>
body{font-family:sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
figure{margin:.5em 0}figcaption{font-size:.9em;color:#555}.cards span{display:inline-block;margin-right:2em}
</style></head><body>
<h1>Canopy console</h1>
<p>{{.Now}} · <a href="/status.json">status.json</a> · <a href="/metrics">metrics</a> · <a href="/debug/pprof/">profiles</a></p>
<p class="cards"><span>memory: <b>{{.Resident}}</b></span><span>inodes: <b>{{printf "%.0f" .Inodes}}</b></span><span>memory per file: <b>{{.PerFile}}</b></span><span>log position: <b>{{printf "%.0f" .LSN}}</b></span></p>
<h2>Last hour ({{.Samples}} samples)</h2>
{{.OpsChart}}
{{.LatencyChart}}
<h2>Slowest operations, last interval</h2>
<table id="slowest"><tr><th>operation</th><th>calls</th><th>mean ms</th></tr>
{{range .Slowest}}<tr><td>{{.Method}}</td><td>{{printf "%.0f" .Calls}}</td><td>{{printf "%.3f" .MeanMs}}</td></tr>
{{else}}<tr><td colspan="3">none yet</td></tr>{{end}}</table>
<h2>Status</h2>
<table id="status">{{range .Status}}<tr><th>{{.Key}}</th><td>{{.Value}}</td></tr>{{end}}</table>
</body></html>
`))

// page renders the console.
func (s *sampler) page(w http.ResponseWriter, status map[string]any) {
	s.mu.Lock()
	var ops, lat []float64
	for _, p := range s.samples[min(1, len(s.samples)):] {
		ops = append(ops, p.ops)
		lat = append(lat, p.latencyMs)
	}
	d := consoleData{
		Now: time.Now().UTC().Format(time.RFC3339), Samples: len(ops),
		Inodes: s.gauges["canopy_meta_inodes"], LSN: s.gauges["canopy_meta_log_lsn"],
		Slowest: slices.Clone(s.slowest),
	}
	rss := s.gauges["process_resident_memory_bytes"]
	s.mu.Unlock()
	d.OpsChart = chart("operations per second", "ops/s", ops)
	d.LatencyChart = chart("mean latency", "ms", lat)
	d.Resident = fmt.Sprintf("%.1f MiB", rss/(1<<20))
	d.PerFile = "-"
	if d.Inodes > 0 {
		d.PerFile = fmt.Sprintf("%.0f bytes", rss/d.Inodes)
	}
	keys := make([]string, 0, len(status))
	for k := range status {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		d.Status = append(d.Status, kv{k, fmt.Sprint(status[k])})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'")
	consoleTmpl.Execute(w, d)
}
