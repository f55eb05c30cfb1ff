package bench

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// A series keeps a phase's latencies by the interval in which each
// operation ended: interval i holds what ended from i to i+1 intervals
// after the phase's start. What ends after the last interval (replies to
// sends still in flight at the deadline, and the open loop's backlog,
// counted at the end) goes into the last one. This is how HdrHistogram's
// interval logs and wrk2 bucket latencies: a stall shows in the interval
// in which its victims finally got their answers.
//
// Its histograms keep two significant digits (1 %), which is plenty for
// a percentile per interval and keeps a long hold small: about 36 KiB per
// interval and stripe.
type series struct {
	interval time.Duration
	n        int // intervals in the phase
	length   time.Duration
	stripes  []*seriesStripe
}

// seriesStripes bounds the locks a series spreads its workers over.
const seriesStripes = 4

// seriesDigits is the precision of a series' histograms.
const seriesDigits = 2

type seriesStripe struct {
	mu      sync.Mutex
	buckets []seriesBucket
}

// seriesBucket is what one stripe saw in one interval.
type seriesBucket struct {
	hist               *hdrhistogram.Histogram // nil until something is recorded
	ops, errs, backlog int64
}

func newSeries(interval time.Duration, workers int) *series {
	s := &series{interval: interval, stripes: make([]*seriesStripe, max(1, min(workers, seriesStripes)))}
	for i := range s.stripes {
		s.stripes[i] = &seriesStripe{}
	}
	return s
}

// reset empties the series for a phase lasting d. It is called before
// the phase's workers start.
func (s *series) reset(d time.Duration) {
	s.length = d
	s.n = max(1, int((d+s.interval-1)/s.interval))
	for _, st := range s.stripes {
		for i := range st.buckets {
			if h := st.buckets[i].hist; h != nil {
				h.Reset()
			}
			st.buckets[i] = seriesBucket{hist: st.buckets[i].hist}
		}
	}
}

// bucket returns the bucket of stripe st for time at into the phase; the
// caller holds st.mu.
func (s *series) bucket(st *seriesStripe, at time.Duration) *seriesBucket {
	i := min(max(int(at/s.interval), 0), s.n-1)
	for len(st.buckets) <= i {
		st.buckets = append(st.buckets, seriesBucket{})
	}
	return &st.buckets[i]
}

// add records count latencies of lat ending at time at into the phase, as
// worker w. Backlog entries were never sent: they count as waits, not as
// operations.
func (s *series) add(w int, at, lat time.Duration, count int64, backlog bool) {
	st := s.stripes[w%len(s.stripes)]
	st.mu.Lock()
	defer st.mu.Unlock()
	b := s.bucket(st, at)
	if b.hist == nil {
		b.hist = hdrhistogram.New(histMin, histMax, seriesDigits)
	}
	_ = b.hist.RecordValues(clamp(lat), count) // cannot fail: the value is in range
	if backlog {
		b.backlog += count
	} else {
		b.ops += count
	}
}

// fail counts a failed operation that ended at time at into the phase.
func (s *series) fail(w int, at time.Duration) {
	st := s.stripes[w%len(s.stripes)]
	st.mu.Lock()
	defer st.mu.Unlock()
	s.bucket(st, at).errs++
}

// Interval is what one interval of a held rate saw: the operations that
// ended in it.
type Interval struct {
	// Second is the end of the interval, in seconds since the phase began.
	Second          float64 `json:"second"`
	TargetOpsPerSec float64 `json:"target_ops_per_sec"`
	OpsPerSec       float64 `json:"ops_per_sec"` // successful operations that ended in it, per second
	Ops             int64   `json:"ops"`
	Errors          int64   `json:"errors"`
	Backlog         int64   `json:"backlog"` // the open loop's unissued sends (last interval only)
	Latency
}

// intervals returns one row per interval of the phase that ran at rate
// target; call it after the phase.
func (s *series) intervals(target float64) []Interval {
	out := make([]Interval, s.n)
	for i := range out {
		h := newHistogramDigits(seriesDigits)
		var ops, errs, backlog int64
		for _, st := range s.stripes {
			st.mu.Lock()
			if i < len(st.buckets) {
				b := &st.buckets[i]
				if b.hist != nil {
					h.Merge(b.hist)
				}
				ops, errs, backlog = ops+b.ops, errs+b.errs, backlog+b.backlog
			}
			st.mu.Unlock()
		}
		end := min(time.Duration(i+1)*s.interval, s.length)
		span := end - time.Duration(i)*s.interval
		out[i] = Interval{
			Second: end.Seconds(), TargetOpsPerSec: target,
			Ops: ops, Errors: errs, Backlog: backlog, Latency: summarize(h),
		}
		if span > 0 {
			out[i].OpsPerSec = float64(ops) / span.Seconds()
		}
	}
	return out
}

func newHistogramDigits(digits int) *hdrhistogram.Histogram {
	return hdrhistogram.New(histMin, histMax, digits)
}
