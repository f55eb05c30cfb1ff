package bench

import (
	"fmt"
	"time"
)

// Thresholds of the warnings a result carries.
const (
	// CeilingMargin: a rate within this fraction of the ceiling is the
	// harness's, not the server's.
	CeilingMargin = 0.10
	// NoisyCV: rounds whose rates vary more than this (coefficient of
	// variation) were disturbed by something else on the machine.
	NoisyCV = 0.10
	// SteadyCV: closed-loop rounds whose rates agree more closely than this
	// were paced by something other than the system under test (a rate
	// limit, a cache, a fixed cost of the harness, a fake clock): real I/O
	// on a shared machine is not that regular.
	SteadyCV = 0.002
	// steadyRounds is the fewest rounds for which SteadyCV is judged.
	steadyRounds = 3
	// ShortRound: rounds shorter than this on average are dominated by
	// start-up and tail effects.
	ShortRound = time.Second
)

// assess lists what a reader of r must know before trusting it. The list
// is never nil, so it encodes as [] when empty.
func assess(r *Result) []string {
	w := []string{}
	if r.CeilingOpsPerSec > 0 && r.OpsPerSec >= (1-CeilingMargin)*r.CeilingOpsPerSec {
		w = append(w, fmt.Sprintf("measuring the harness, not the server: %.0f ops/s is %.0f%% of the %s ceiling (%.0f ops/s at the same concurrency)",
			r.OpsPerSec, 100*r.HarnessShare, r.CeilingOp, r.CeilingOpsPerSec))
	}
	if r.CV > NoisyCV {
		w = append(w, fmt.Sprintf("noisy machine: the rounds' rates vary by %.1f%% (coefficient of variation above %.0f%%); run more rounds or on a quieter host",
			100*r.CV, 100*NoisyCV))
	}
	if len(r.PerRound) >= steadyRounds && r.Loop != "open" && r.CV < SteadyCV {
		w = append(w, fmt.Sprintf("too stable: the %d rounds' rates agree to within %.2f%% (below %.1f%%), more than real I/O on a shared machine does; something else paced the run (a rate limit, a cache, the harness), check before trusting it",
			len(r.PerRound), 100*r.CV, 100*SteadyCV))
	}
	if r.Errors > 0 {
		w = append(w, fmt.Sprintf("%d of %d operations failed (first: %s)", r.Errors, r.Errors+r.Ops, r.FirstError))
	}
	if r.Backlog > 0 {
		w = append(w, fmt.Sprintf("open loop fell behind: %d intended sends were never issued; the target of %.0f ops/s is more than the system sustains",
			r.Backlog, r.TargetRate))
	}
	if n := len(r.PerRound); n > 0 {
		var total float64
		for _, rd := range r.PerRound {
			total += rd.Seconds
		}
		if mean := total / float64(n); mean < ShortRound.Seconds() {
			w = append(w, fmt.Sprintf("short rounds: %.2f s on average, so start-up and tail weigh heavily; lengthen them (--duration; for metadata ops that run out of items, --files)", mean))
		}
	}
	return w
}
