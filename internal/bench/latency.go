package bench

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in nanoseconds with three significant digits,
// from 1 ns to an hour; longer values are recorded as an hour.
const (
	histMin    = 1
	histMax    = int64(time.Hour)
	histDigits = 3
)

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMin, histMax, histDigits)
}

// record adds one latency to h, clamped to the histogram's range.
func record(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(clamp(d)) // cannot fail: the value is in range
}

// clamp is d in nanoseconds, within the histogram's range.
func clamp(d time.Duration) int64 {
	return min(max(int64(d), 0), histMax)
}

// Latency summarises a latency distribution, in microseconds.
type Latency struct {
	MeanUs float64 `json:"mean_us"`
	P50Us  float64 `json:"p50_us"`
	P90Us  float64 `json:"p90_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`
}

// summarize reads the percentiles off h; an empty h gives zeros.
func summarize(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return Latency{
		MeanUs: h.Mean() / 1e3,
		P50Us:  us(h.ValueAtQuantile(50)),
		P90Us:  us(h.ValueAtQuantile(90)),
		P99Us:  us(h.ValueAtQuantile(99)),
		P999Us: us(h.ValueAtQuantile(99.9)),
		MaxUs:  us(h.Max()),
	}
}
