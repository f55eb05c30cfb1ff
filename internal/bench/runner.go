package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"
)

// DefaultRounds is how many rounds a Config with Rounds 0 runs.
const DefaultRounds = 3

// Config says how to drive a workload.
type Config struct {
	Workers int // concurrent callers, each with at most one operation in flight

	// Rate is the intended operations per second across all workers: the
	// open loop. Each send has an intended time, start + k/Rate, and its
	// latency runs from that time, so a send delayed because every worker
	// was busy counts its wait. 0 is the closed loop: every worker sends
	// its next operation as soon as the previous one returns.
	Rate float64

	Duration time.Duration // longest a round lasts
	Warmup   time.Duration // run before the first round, not measured; 0 = none
	Rounds   int           // measured rounds; 0 = DefaultRounds

	Progress io.Writer // one line per round as it ends; nil = quiet
	Label    string    // names the run in progress lines

	clock clock // nil = the real one
}

func (c *Config) check() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("need at least one worker, have %d", c.Workers)
	case c.Duration <= 0:
		return fmt.Errorf("round duration %v is not positive", c.Duration)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("rate %v is not a number of operations per second", c.Rate)
	case c.Warmup < 0:
		return fmt.Errorf("warm-up %v is negative", c.Warmup)
	case c.Rounds < 0:
		return fmt.Errorf("rounds %d is negative", c.Rounds)
	}
	if c.Rounds == 0 {
		c.Rounds = DefaultRounds
	}
	if c.clock == nil {
		c.clock = realClock{}
	}
	return nil
}

// Run drives wl as cfg says: the warm-up, then the rounds. It fails if
// Prepare fails or ctx ends; failed operations are counted, not fatal.
func Run(ctx context.Context, cfg Config, wl Workload) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	loop := "closed"
	if cfg.Rate > 0 {
		loop = "open"
	}
	res := &Result{
		Loop: loop, Clients: cfg.Workers, Conns: 1, TargetRate: cfg.Rate, Rounds: cfg.Rounds,
		DurationSec: cfg.Duration.Seconds(), WarmupSec: cfg.Warmup.Seconds(),
	}
	p := newPhaseRun(cfg, wl)
	if cfg.Warmup > 0 {
		if err := wl.Prepare(ctx, 0); err != nil {
			return nil, fmt.Errorf("prepare warm-up: %w", err)
		}
		if err := p.run(ctx, cfg.Warmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	all := newHistogram()
	rates := make([]float64, 0, cfg.Rounds)
	for r := 1; r <= cfg.Rounds; r++ {
		if err := wl.Prepare(ctx, r); err != nil {
			return nil, fmt.Errorf("prepare round %d: %w", r, err)
		}
		if err := p.run(ctx, cfg.Duration); err != nil {
			return nil, fmt.Errorf("round %d: %w", r, err)
		}
		h, ops, errs, firstErr := p.collect()
		all.Merge(h)
		rd := Round{
			Round: r, Start: p.start, Seconds: p.elapsed.Seconds(),
			Ops: ops, Errors: errs, Backlog: p.backlog, Latency: summarize(h),
		}
		if p.elapsed > 0 {
			rd.OpsPerSec = float64(ops) / p.elapsed.Seconds()
		}
		res.PerRound = append(res.PerRound, rd)
		rates = append(rates, rd.OpsPerSec)
		res.Ops += ops
		res.Errors += errs
		res.Backlog += p.backlog
		if res.FirstError == "" && firstErr != nil {
			res.FirstError = firstErr.Error()
		}
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "%s round %d/%d: %.0f ops/s, p50 %s, p99 %s, %d errors\n",
				cfg.Label, r, cfg.Rounds, rd.OpsPerSec, fmtUs(rd.P50Us), fmtUs(rd.P99Us), errs)
		}
	}
	res.OpsPerSec, res.StddevOpsPerSec, res.CV = spread(rates)
	res.Latency = summarize(all)
	res.Warnings = assess(res)
	return res, nil
}
