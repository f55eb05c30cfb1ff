package bench

import "time"

// Round is one measured round.
type Round struct {
	Round     int       `json:"round"`
	Start     time.Time `json:"start"`
	Seconds   float64   `json:"seconds"` // from the first send to the last reply
	Ops       int64     `json:"ops"`     // operations that succeeded
	Errors    int64     `json:"errors"`  // operations that failed
	Backlog   int64     `json:"backlog"` // open loop: intended sends never issued
	OpsPerSec float64   `json:"ops_per_sec"`
	Latency
}

// Result is the outcome of one benchmark: its rounds, their spread, the
// latency over all rounds, and the ceiling it is judged against.
type Result struct {
	Mode        string  `json:"mode"` // rpc or meta
	Op          string  `json:"op"`
	Loop        string  `json:"loop"`    // closed or open
	Clients     int     `json:"clients"` // concurrent callers (meta: threads)
	Conns       int     `json:"conns"`   // client connections they share
	TargetRate  float64 `json:"target_ops_per_sec,omitempty"`
	Rounds      int     `json:"rounds"`
	DurationSec float64 `json:"duration_sec"` // longest a round may last
	WarmupSec   float64 `json:"warmup_sec"`

	Ops             int64   `json:"ops"`
	Errors          int64   `json:"errors"`
	Backlog         int64   `json:"backlog"`
	OpsPerSec       float64 `json:"ops_per_sec"` // mean over the rounds
	StddevOpsPerSec float64 `json:"stddev_ops_per_sec"`
	CV              float64 `json:"cv"` // stddev / mean of the rounds' rates
	Latency                 // over all rounds

	CeilingOp        string  `json:"ceiling_op,omitempty"` // ping or noop
	CeilingOpsPerSec float64 `json:"ceiling_ops_per_sec"`
	HarnessShare     float64 `json:"harness_share"` // ops_per_sec / ceiling_ops_per_sec

	Params     map[string]any `json:"params,omitempty"` // the workload's own settings
	FirstError string         `json:"first_error,omitempty"`
	Warnings   []string       `json:"warnings"`
	PerRound   []Round        `json:"per_round"`
}

// SetCeiling records the rate the harness reaches with ceilingOp at the
// same concurrency, and judges the result against it.
func (r *Result) SetCeiling(ceilingOp string, opsPerSec float64) {
	r.CeilingOp = ceilingOp
	r.CeilingOpsPerSec = opsPerSec
	r.HarnessShare = 0
	if opsPerSec > 0 {
		r.HarnessShare = r.OpsPerSec / opsPerSec
	}
	r.Warnings = assess(r)
}

// Summary is the report of a run of several metadata phases (--op all).
type Summary struct {
	Mode             string    `json:"mode"`
	Op               string    `json:"op"`
	Clients          int       `json:"clients"`
	CeilingOp        string    `json:"ceiling_op,omitempty"`
	CeilingOpsPerSec float64   `json:"ceiling_ops_per_sec"`
	Phases           []*Result `json:"phases"`
	Warnings         []string  `json:"warnings"` // every phase's, prefixed with its op
}

// Summarize gathers the results of several phases into one report.
func Summarize(mode, op string, results []*Result) *Summary {
	s := &Summary{Mode: mode, Op: op, Phases: results, Warnings: []string{}}
	for _, r := range results {
		s.Clients = r.Clients
		s.CeilingOp, s.CeilingOpsPerSec = r.CeilingOp, r.CeilingOpsPerSec
		for _, w := range r.Warnings {
			s.Warnings = append(s.Warnings, r.Op+": "+w)
		}
	}
	return s
}
