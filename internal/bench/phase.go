package bench

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// maxShards bounds the latency histograms a run keeps: workers beyond it
// share one (under a lock), which keeps memory flat at high concurrency.
const maxShards = 64

// workerStats is what one worker counted in a phase; only it writes them.
type workerStats struct {
	ops, errs int64
	firstErr  error
	exhausted bool
	dropped   int64 // open loop: a ticket taken but never sent; -1 = none
}

// shard is a latency histogram some workers share.
type shard struct {
	mu   sync.Mutex
	hist *hdrhistogram.Histogram
}

// phaseRun runs phases of one workload, reusing its histograms.
type phaseRun struct {
	cfg    Config
	wl     Workload
	stats  []*workerStats
	shards []*shard

	// Set by run.
	start, deadline time.Time
	elapsed         time.Duration
	next            atomic.Int64 // open loop: the next ticket
	backlog         int64

	// series, when set, also receives every latency by the interval in
	// which its operation ended (see series.go).
	series *series
}

func newPhaseRun(cfg Config, wl Workload) *phaseRun {
	p := &phaseRun{cfg: cfg, wl: wl, stats: make([]*workerStats, cfg.Workers)}
	for i := range p.stats {
		p.stats[i] = &workerStats{}
	}
	p.shards = make([]*shard, min(cfg.Workers, maxShards))
	for i := range p.shards {
		p.shards[i] = &shard{hist: newHistogram()}
	}
	return p
}

// run runs one phase of length d and leaves its counts in p.
func (p *phaseRun) run(ctx context.Context, d time.Duration) error {
	for i, st := range p.stats {
		*st = workerStats{dropped: -1}
		p.shards[i%len(p.shards)].hist.Reset()
	}
	p.next.Store(0)
	p.backlog = 0
	p.start = p.cfg.clock.Now()
	if p.series != nil {
		p.series.reset(d)
	}
	p.deadline = p.start.Add(d)
	var wg sync.WaitGroup
	for w := range p.cfg.Workers {
		wg.Go(func() {
			if p.cfg.Rate > 0 {
				p.open(ctx, w)
			} else {
				p.closed(ctx, w)
			}
		})
	}
	wg.Wait()
	end := p.cfg.clock.Now()
	p.elapsed = end.Sub(p.start)
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.cfg.Rate > 0 {
		p.countBacklog(end)
	}
	return nil
}

// closed is one worker of the closed loop: the next operation starts when
// the previous one returns.
func (p *phaseRun) closed(ctx context.Context, w int) {
	t := p.cfg.clock.Now()
	for t.Before(p.deadline) && ctx.Err() == nil {
		err := p.wl.Do(ctx, w)
		end := p.cfg.clock.Now()
		if !p.account(ctx, w, err, end, end.Sub(t)) {
			return
		}
		t = end
	}
}

// open is one worker of the open loop: it takes the next ticket, waits
// for the ticket's intended time if that is still ahead, and measures
// from the intended time, not from when it could send.
func (p *phaseRun) open(ctx context.Context, w int) {
	for ctx.Err() == nil {
		k := p.next.Add(1) - 1
		due := p.due(k)
		if !due.Before(p.deadline) {
			return
		}
		if now := p.cfg.clock.Now(); !now.Before(p.deadline) {
			p.stats[w].dropped = k
			return
		} else if due.After(now) {
			p.cfg.clock.SleepUntil(ctx, due)
		}
		err := p.wl.Do(ctx, w)
		end := p.cfg.clock.Now()
		if !p.account(ctx, w, err, end, end.Sub(due)) {
			return
		}
	}
}

// due is the intended send time of ticket k.
func (p *phaseRun) due(k int64) time.Time {
	return p.start.Add(time.Duration(float64(k) * float64(time.Second) / p.cfg.Rate))
}

// account counts one operation of worker w that ended at end; false means
// the worker stops.
func (p *phaseRun) account(ctx context.Context, w int, err error, end time.Time, lat time.Duration) bool {
	st := p.stats[w]
	switch {
	case err == nil:
		st.ops++
		s := p.shards[w%len(p.shards)]
		s.mu.Lock()
		record(s.hist, lat)
		s.mu.Unlock()
		if p.series != nil {
			p.series.add(w, end.Sub(p.start), lat, 1, false)
		}
	case errors.Is(err, ErrExhausted):
		st.exhausted = true
		return false
	case ctx.Err() != nil:
		return false // interrupted, not failed
	default:
		st.errs++
		if st.firstErr == nil {
			st.firstErr = err
		}
		if p.series != nil {
			p.series.fail(w, end.Sub(p.start))
		}
	}
	return true
}

// countBacklog records the sends the open loop intended before the
// deadline but never issued. Each waited at least until end, so that wait
// goes into the histogram as a lower bound: leaving them out would hide
// exactly the delay the open loop exists to show.
func (p *phaseRun) countBacklog(end time.Time) {
	exhausted := true
	for _, st := range p.stats {
		exhausted = exhausted && st.exhausted
	}
	if exhausted {
		return // the work ran out, not the time
	}
	h := p.shards[0].hist
	for _, st := range p.stats {
		if st.dropped >= 0 {
			record(h, end.Sub(p.due(st.dropped)))
			p.backlog++
			if p.series != nil {
				p.series.add(0, end.Sub(p.start), end.Sub(p.due(st.dropped)), 1, true)
			}
		}
	}
	// Tickets first to n-1 were never taken. Their waits fall evenly from
	// end-due(first) to end-due(n-1); past backlogChunks of them, each
	// chunk is recorded at its middle, well within the histogram's
	// precision.
	first, n := p.next.Load(), p.tickets()
	if first >= n {
		return
	}
	count := n - first
	chunk := max(1, count/backlogChunks)
	for k := first; k < n; k += chunk {
		c := min(chunk, n-k)
		_ = h.RecordValues(clamp(end.Sub(p.due(k+c/2))), c)
		if p.series != nil {
			p.series.add(0, end.Sub(p.start), end.Sub(p.due(k+c/2)), c, true)
		}
	}
	p.backlog += count
}

// backlogChunks bounds the histogram updates countBacklog makes.
const backlogChunks = 100_000

// tickets is the number of sends the open loop intends before the deadline.
func (p *phaseRun) tickets() int64 {
	n := int64(math.Ceil(p.deadline.Sub(p.start).Seconds() * p.cfg.Rate))
	for n > 0 && !p.due(n-1).Before(p.deadline) {
		n--
	}
	for p.due(n).Before(p.deadline) {
		n++
	}
	return n
}

// collect merges the phase's histograms and counts.
func (p *phaseRun) collect() (h *hdrhistogram.Histogram, ops, errs int64, firstErr error) {
	h = newHistogram()
	for _, s := range p.shards {
		h.Merge(s.hist)
	}
	for _, st := range p.stats {
		ops += st.ops
		errs += st.errs
		if firstErr == nil {
			firstErr = st.firstErr
		}
	}
	return h, ops, errs, firstErr
}
