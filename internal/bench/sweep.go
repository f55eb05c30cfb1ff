package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Defaults of the sweep.
const (
	DefaultSweepStartFraction = 0.25 // of the closed-loop estimate
	DefaultSweepStep          = 1.5
	DefaultSweepMaxSteps      = 12
	DefaultSweepStepDuration  = 3 * time.Second
	DefaultSweepRefine        = 2
	DefaultSweepHold          = 0.8
	DefaultSweepHoldDuration  = 30 * time.Second
	DefaultSweepEstimate      = 2 * time.Second
	DefaultSweepInterval      = time.Second
)

// What a step must show to be sustainable.
const (
	// SustainShare: the achieved rate is at least this share of the target.
	SustainShare = 0.95
	// SustainBacklog: sends never issued by the end of the step are at
	// most this share of the step's intended sends.
	SustainBacklog = 0.01
	// SustainErrors: failed operations are at most this share of those
	// issued.
	SustainErrors = 0.01
	// P99BoundFactor and MinP99Bound: without an SLO, a step's p99 must
	// stay under P99BoundFactor times the p99 of the first step that kept
	// up, and never less than MinP99Bound, so that scheduler noise on an
	// idle system does not end the sweep.
	P99BoundFactor = 10
	MinP99Bound    = time.Millisecond
)

// SweepConfig says how to look for a workload's maximum sustainable rate
// and how long to hold a share of it.
type SweepConfig struct {
	Workers int // concurrent callers, each with at most one operation in flight

	// Start is the first step's rate; 0 = DefaultSweepStartFraction of the
	// closed-loop rate, measured for Estimate first.
	Start    float64
	Estimate time.Duration // 0 = DefaultSweepEstimate

	// Step multiplies the rate from one step to the next (> 1). When the
	// first step does not keep up, the sweep divides by it instead.
	Step         float64
	MaxSteps     int           // steps up (or down) at most; 0 = DefaultSweepMaxSteps
	StepDuration time.Duration // 0 = DefaultSweepStepDuration

	// Refine is the number of bisection steps (at the geometric mean)
	// between the last sustainable rate and the first that was not.
	// Negative = none; 0 = DefaultSweepRefine.
	Refine int

	// SLO bounds a sustainable step's p99; 0 = P99BoundFactor times the
	// first sustainable step's p99, at least MinP99Bound.
	SLO time.Duration

	Hold         float64       // share of the maximum held; 0 = DefaultSweepHold
	HoldDuration time.Duration // 0 = DefaultSweepHoldDuration
	Interval     time.Duration // the hold's latencies are reported per interval; 0 = DefaultSweepInterval

	// Warmup runs the closed loop before anything is measured, and the
	// hold's rate for up to as long before the hold (capped at one step);
	// 0 = none.
	Warmup time.Duration

	Progress io.Writer // one line per step and for the hold; nil = quiet
	Label    string    // names the run in progress lines

	clock clock // nil = the real one
}

func (c *SweepConfig) check() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("need at least one worker, have %d", c.Workers)
	case c.Start < 0 || math.IsNaN(c.Start) || math.IsInf(c.Start, 0):
		return fmt.Errorf("start rate %v is not a number of operations per second", c.Start)
	case c.Step != 0 && (c.Step <= 1 || math.IsInf(c.Step, 0) || math.IsNaN(c.Step)):
		return fmt.Errorf("step factor %v must be above 1", c.Step)
	case c.MaxSteps < 0:
		return fmt.Errorf("max steps %d is negative", c.MaxSteps)
	case c.StepDuration < 0 || c.HoldDuration < 0 || c.Estimate < 0 || c.Warmup < 0 || c.Interval < 0 || c.SLO < 0:
		return errors.New("durations must not be negative")
	case c.Hold < 0 || c.Hold > 1 || math.IsNaN(c.Hold):
		return fmt.Errorf("hold share %v is not between 0 and 1", c.Hold)
	}
	if c.Estimate == 0 {
		c.Estimate = DefaultSweepEstimate
	}
	if c.Step == 0 {
		c.Step = DefaultSweepStep
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = DefaultSweepMaxSteps
	}
	if c.StepDuration == 0 {
		c.StepDuration = DefaultSweepStepDuration
	}
	switch {
	case c.Refine == 0:
		c.Refine = DefaultSweepRefine
	case c.Refine < 0:
		c.Refine = 0
	}
	if c.Hold == 0 {
		c.Hold = DefaultSweepHold
	}
	if c.HoldDuration == 0 {
		c.HoldDuration = DefaultSweepHoldDuration
	}
	if c.Interval == 0 {
		c.Interval = DefaultSweepInterval
	}
	if c.clock == nil {
		c.clock = realClock{}
	}
	return nil
}

// SweepStep is one open-loop step of the search.
type SweepStep struct {
	Step            int     `json:"step"`
	Kind            string  `json:"kind"` // step, or refine for a bisection step
	TargetOpsPerSec float64 `json:"target_ops_per_sec"`
	OpsPerSec       float64 `json:"ops_per_sec"` // achieved: successes over the time to the last reply
	Seconds         float64 `json:"seconds"`
	Ops             int64   `json:"ops"`
	Errors          int64   `json:"errors"`
	Backlog         int64   `json:"backlog"`
	Latency
	Sustainable bool   `json:"sustainable"`
	Reason      string `json:"reason,omitempty"` // why it was not
}

// SweepResult is the outcome of a sweep: the steps, the maximum they
// found, and the hold at a share of it.
type SweepResult struct {
	Mode    string `json:"mode"` // sweep
	Op      string `json:"op"`
	Clients int    `json:"clients"` // workers (threads)
	Conns   int    `json:"conns"`

	ClosedLoopOpsPerSec float64 `json:"closed_loop_ops_per_sec"` // the estimate; 0 when Start was given
	StartOpsPerSec      float64 `json:"start_ops_per_sec"`
	StepFactor          float64 `json:"step_factor"`
	StepSec             float64 `json:"step_sec"`
	P99BoundUs          float64 `json:"p99_bound_us"`
	SLO                 bool    `json:"slo"` // the bound was given, not derived

	MaxOpsPerSec float64 `json:"max_ops_per_sec"` // the highest sustainable step's target

	HoldFraction        float64 `json:"hold_fraction"`
	HoldSec             float64 `json:"hold_sec"`
	HoldTargetOpsPerSec float64 `json:"hold_target_ops_per_sec"`
	HoldOpsPerSec       float64 `json:"hold_ops_per_sec"` // achieved
	HoldOps             int64   `json:"hold_ops"`
	HoldErrors          int64   `json:"hold_errors"`
	HoldBacklog         int64   `json:"hold_backlog"`
	HoldMeanUs          float64 `json:"hold_mean_us"`
	HoldP50Us           float64 `json:"hold_p50_us"`
	HoldP90Us           float64 `json:"hold_p90_us"`
	HoldP99Us           float64 `json:"hold_p99_us"`
	HoldP999Us          float64 `json:"hold_p999_us"`
	HoldMaxUs           float64 `json:"hold_max_us"`

	CeilingOp        string  `json:"ceiling_op,omitempty"`
	CeilingOpsPerSec float64 `json:"ceiling_ops_per_sec"`

	Params     map[string]any `json:"params,omitempty"`
	FirstError string         `json:"first_error,omitempty"`
	Warnings   []string       `json:"warnings"`
	Steps      []SweepStep    `json:"steps"`
	PerSecond  []Interval     `json:"per_second"` // the hold, one row per interval
}

// holdLatency returns the hold's latency summary.
func (r *SweepResult) holdLatency() Latency {
	return Latency{MeanUs: r.HoldMeanUs, P50Us: r.HoldP50Us, P90Us: r.HoldP90Us, P99Us: r.HoldP99Us, P999Us: r.HoldP999Us, MaxUs: r.HoldMaxUs}
}

// Sweep finds the highest rate wl sustains in an open loop, then holds
// cfg.Hold of it and reports its latency per interval.
//
// The steps multiply the rate by cfg.Step from cfg.Start (by default a
// quarter of the closed-loop rate) until a step does not keep up, or
// divide it until one does; a step keeps up when it achieves SustainShare
// of its target, leaves at most SustainBacklog of its sends unissued,
// fails at most SustainErrors of them, and its p99 stays under the bound.
// cfg.Refine bisection steps then narrow the gap between the last step
// that kept up and the first that did not. The maximum is the highest
// target that kept up.
//
// If no step keeps up, the result holds the steps and the error says so.
func Sweep(ctx context.Context, cfg SweepConfig, wl Workload) (*SweepResult, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &sweeper{cfg: cfg, wl: wl, bound: cfg.SLO}
	s.p = newPhaseRun(Config{Workers: cfg.Workers, Duration: cfg.StepDuration, Rounds: 1, clock: cfg.clock}, wl)
	s.res = &SweepResult{
		Mode: "sweep", Clients: cfg.Workers, Conns: 1, StepFactor: cfg.Step, StepSec: cfg.StepDuration.Seconds(),
		HoldFraction: cfg.Hold, HoldSec: cfg.HoldDuration.Seconds(), SLO: cfg.SLO > 0,
		Warnings: []string{}, Steps: []SweepStep{}, PerSecond: []Interval{},
	}
	if err := s.search(ctx); err != nil {
		return s.res, err
	}
	if err := s.hold(ctx); err != nil {
		return s.res, err
	}
	s.res.Warnings = assessSweep(s.res, s.exhausted)
	return s.res, nil
}

type sweeper struct {
	cfg       SweepConfig
	wl        Workload
	p         *phaseRun
	res       *SweepResult
	phase     int           // the next Prepare's phase
	bound     time.Duration // a sustainable step's p99 limit; 0 until known
	exhausted bool          // the steps ran out before one failed
}

// run prepares the next phase and runs it at rate (0 = closed loop) for d.
func (s *sweeper) run(ctx context.Context, rate float64, d time.Duration) error {
	if err := s.wl.Prepare(ctx, s.phase); err != nil {
		return fmt.Errorf("prepare phase %d: %w", s.phase, err)
	}
	s.phase++
	s.p.cfg.Rate = rate
	return s.p.run(ctx, d)
}

func (s *sweeper) progress(format string, args ...any) {
	if s.cfg.Progress != nil {
		label := s.cfg.Label
		if label == "" {
			label = "sweep"
		}
		fmt.Fprintf(s.cfg.Progress, label+" "+format+"\n", args...)
	}
}

// search runs the warm-up, the estimate and the steps, and sets the
// maximum.
func (s *sweeper) search(ctx context.Context) error {
	cfg, res := &s.cfg, s.res
	if cfg.Warmup > 0 {
		if err := s.run(ctx, 0, cfg.Warmup); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	rate := cfg.Start
	if rate == 0 {
		if err := s.run(ctx, 0, cfg.Estimate); err != nil {
			return fmt.Errorf("closed-loop estimate: %w", err)
		}
		_, ops, _, firstErr := s.p.collect()
		if ops == 0 || s.p.elapsed <= 0 {
			return fmt.Errorf("closed-loop estimate: no operation succeeded (first error: %v)", firstErr)
		}
		res.ClosedLoopOpsPerSec = float64(ops) / s.p.elapsed.Seconds()
		rate = res.ClosedLoopOpsPerSec * DefaultSweepStartFraction
		s.progress("closed loop: %.0f ops/s; first step at %.0f ops/s", res.ClosedLoopOpsPerSec, rate)
	}
	res.StartOpsPerSec = rate

	var lo, hi float64 // the highest target that kept up; the lowest above it that did not
	for range cfg.MaxSteps {
		st, err := s.step(ctx, "step", rate)
		if err != nil {
			return err
		}
		if st.Sustainable {
			lo = rate
			if hi > 0 {
				break
			}
			rate *= cfg.Step
		} else {
			hi = rate
			if lo > 0 {
				break
			}
			rate /= cfg.Step
		}
	}
	if lo == 0 {
		return fmt.Errorf("no step kept up, down to %.0f ops/s: %s", hi, res.Steps[len(res.Steps)-1].Reason)
	}
	s.exhausted = hi == 0
	for i := 0; i < cfg.Refine && hi > 0; i++ {
		mid := math.Sqrt(lo * hi)
		st, err := s.step(ctx, "refine", mid)
		if err != nil {
			return err
		}
		if st.Sustainable {
			lo = mid
		} else {
			hi = mid
		}
	}
	res.MaxOpsPerSec = lo
	res.P99BoundUs = float64(s.bound) / 1e3
	return nil
}

// step runs one open-loop step at rate and judges it.
func (s *sweeper) step(ctx context.Context, kind string, rate float64) (*SweepStep, error) {
	n := len(s.res.Steps) + 1
	if err := s.run(ctx, rate, s.cfg.StepDuration); err != nil {
		return nil, fmt.Errorf("step %d at %.0f ops/s: %w", n, rate, err)
	}
	h, ops, errs, firstErr := s.p.collect()
	st := SweepStep{
		Step: n, Kind: kind, TargetOpsPerSec: rate, Seconds: s.p.elapsed.Seconds(),
		Ops: ops, Errors: errs, Backlog: s.p.backlog, Latency: summarize(h),
	}
	if s.p.elapsed > 0 {
		st.OpsPerSec = float64(ops) / s.p.elapsed.Seconds()
	}
	if firstErr != nil && s.res.FirstError == "" {
		s.res.FirstError = firstErr.Error()
	}
	s.bound = judge(&st, s.bound)
	s.res.Steps = append(s.res.Steps, st)
	verdict := "keeps up"
	if !st.Sustainable {
		verdict = "does not keep up: " + st.Reason
	}
	s.progress("%s %d: target %.0f ops/s, achieved %.0f, p50 %s, p99 %s, backlog %d, %d errors: %s",
		kind, n, rate, st.OpsPerSec, fmtUs(st.P50Us), fmtUs(st.P99Us), st.Backlog, st.Errors, verdict)
	return &s.res.Steps[len(s.res.Steps)-1], nil
}

// judge decides whether st kept up, given the p99 bound (0 = not yet
// known), and returns the bound: a step that keeps up on rate, backlog
// and errors while none did before sets it from its own p99.
func judge(st *SweepStep, bound time.Duration) time.Duration {
	var why []string
	if st.OpsPerSec < SustainShare*st.TargetOpsPerSec {
		why = append(why, fmt.Sprintf("achieved %.0f%% of the target", 100*st.OpsPerSec/st.TargetOpsPerSec))
	}
	if intended := st.Ops + st.Errors + st.Backlog; intended > 0 && float64(st.Backlog) > SustainBacklog*float64(intended) {
		why = append(why, fmt.Sprintf("%.1f%% of the sends never issued", 100*float64(st.Backlog)/float64(intended)))
	}
	if issued := st.Ops + st.Errors; issued > 0 && float64(st.Errors) > SustainErrors*float64(issued) {
		why = append(why, fmt.Sprintf("%.1f%% of the operations failed", 100*float64(st.Errors)/float64(issued)))
	}
	if bound == 0 && len(why) == 0 {
		bound = max(time.Duration(P99BoundFactor*st.P99Us*1e3), MinP99Bound)
	}
	if bound > 0 && st.P99Us*1e3 > float64(bound) {
		why = append(why, fmt.Sprintf("p99 %s over the bound of %s", fmtUs(st.P99Us), fmtUs(float64(bound)/1e3)))
	}
	st.Sustainable = len(why) == 0
	st.Reason = strings.Join(why, "; ")
	return bound
}

// hold runs cfg.Hold of the maximum for cfg.HoldDuration, after a short
// unmeasured settling run at the same rate, and records it per interval.
func (s *sweeper) hold(ctx context.Context) error {
	cfg, res := &s.cfg, s.res
	target := res.MaxOpsPerSec * cfg.Hold
	res.HoldTargetOpsPerSec = target
	if settle := min(cfg.Warmup, cfg.StepDuration); settle > 0 {
		if err := s.run(ctx, target, settle); err != nil {
			return fmt.Errorf("settle before the hold: %w", err)
		}
	}
	s.progress("hold: %.0f ops/s (%.0f%% of %.0f) for %v", target, 100*cfg.Hold, res.MaxOpsPerSec, cfg.HoldDuration)
	s.p.series = newSeries(cfg.Interval, cfg.Workers)
	defer func() { s.p.series = nil }()
	if err := s.run(ctx, target, cfg.HoldDuration); err != nil {
		return fmt.Errorf("hold at %.0f ops/s: %w", target, err)
	}
	h, ops, errs, firstErr := s.p.collect()
	res.HoldOps, res.HoldErrors, res.HoldBacklog = ops, errs, s.p.backlog
	if s.p.elapsed > 0 {
		res.HoldOpsPerSec = float64(ops) / s.p.elapsed.Seconds()
	}
	l := summarize(h)
	res.HoldMeanUs, res.HoldP50Us, res.HoldP90Us, res.HoldP99Us, res.HoldP999Us, res.HoldMaxUs = l.MeanUs, l.P50Us, l.P90Us, l.P99Us, l.P999Us, l.MaxUs
	if firstErr != nil && res.FirstError == "" {
		res.FirstError = firstErr.Error()
	}
	res.PerSecond = s.p.series.intervals(target)
	s.progress("hold: achieved %.0f ops/s, p50 %s, p99 %s, p99.9 %s, max %s, backlog %d, %d errors",
		res.HoldOpsPerSec, fmtUs(l.P50Us), fmtUs(l.P99Us), fmtUs(l.P999Us), fmtUs(l.MaxUs), res.HoldBacklog, errs)
	return nil
}

// assessSweep lists what a reader of r must know before trusting it; the
// list is never nil.
func assessSweep(r *SweepResult, exhausted bool) []string {
	w := []string{}
	if exhausted {
		w = append(w, fmt.Sprintf("the steps ran out before one failed: the maximum is at least %.0f ops/s, not at most; raise --max-steps or --start", r.MaxOpsPerSec))
	}
	if r.StepSec < ShortRound.Seconds() {
		w = append(w, fmt.Sprintf("short steps: %.2f s each, so start-up and the last replies weigh heavily in each verdict; lengthen --step-duration", r.StepSec))
	}
	if r.HoldTargetOpsPerSec > 0 {
		hold := SweepStep{TargetOpsPerSec: r.HoldTargetOpsPerSec, OpsPerSec: r.HoldOpsPerSec, Ops: r.HoldOps, Errors: r.HoldErrors, Backlog: r.HoldBacklog, Latency: r.holdLatency()}
		judge(&hold, time.Duration(r.P99BoundUs*1e3))
		if !hold.Sustainable {
			w = append(w, fmt.Sprintf("the hold at %.0f ops/s did not keep up (%s): the maximum was found on a better moment or the system degrades over time",
				r.HoldTargetOpsPerSec, hold.Reason))
		}
	}
	if r.HoldErrors > 0 {
		w = append(w, fmt.Sprintf("%d of %d operations of the hold failed (first: %s)", r.HoldErrors, r.HoldErrors+r.HoldOps, r.FirstError))
	}
	return w
}

// SetCeiling records the rate the harness reaches with ceilingOp in a
// closed loop at the same concurrency, and warns when the maximum comes
// near it.
func (r *SweepResult) SetCeiling(ceilingOp string, opsPerSec float64) {
	r.CeilingOp, r.CeilingOpsPerSec = ceilingOp, opsPerSec
	if opsPerSec > 0 && r.MaxOpsPerSec >= (1-CeilingMargin)*opsPerSec {
		r.Warnings = append(r.Warnings, fmt.Sprintf("measuring the harness, not the server: the maximum of %.0f ops/s is %.0f%% of the %s ceiling (%.0f ops/s in a closed loop at the same concurrency)",
			r.MaxOpsPerSec, 100*r.MaxOpsPerSec/opsPerSec, ceilingOp, opsPerSec))
	}
}
