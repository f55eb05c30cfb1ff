package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

// steady is a result of three five-second rounds at rate that vary as
// much as a quiet machine's do (2%).
func steady(rate float64) *Result {
	r := &Result{Mode: "meta", Op: "stat", Loop: "closed", OpsPerSec: rate, Rounds: 3, CV: 0.02}
	for i := 1; i <= 3; i++ {
		r.PerRound = append(r.PerRound, Round{Round: i, Seconds: 5, OpsPerSec: rate})
	}
	r.Warnings = assess(r)
	return r
}

func TestCeilingWarning(t *testing.T) {
	for _, tc := range []struct {
		rate, ceiling float64
		warn          bool
	}{
		{95, 100, true},   // within 10%
		{90, 100, true},   // on the edge
		{120, 100, true},  // above: the ceiling was measured low, the result is the harness's
		{89, 100, false},  // below the margin
		{10, 100, false},  // far below
		{100, 0, false},   // no ceiling measured
		{5e4, 2e7, false}, // rpc against the no-op ceiling
	} {
		r := steady(tc.rate)
		r.SetCeiling("ping", tc.ceiling)
		if got := hasWarning(r, "measuring the harness, not the server"); got != tc.warn {
			t.Errorf("%v ops/s against a ceiling of %v: warning %v, want %v (%q)", tc.rate, tc.ceiling, got, tc.warn, r.Warnings)
		}
		if tc.ceiling > 0 && !near(r.HarnessShare, tc.rate/tc.ceiling, 1e-12) {
			t.Errorf("harness share %v, want %v", r.HarnessShare, tc.rate/tc.ceiling)
		}
	}
}

func TestNoiseWarning(t *testing.T) {
	r := steady(100)
	r.CV = 0.15
	r.Warnings = assess(r)
	if !hasWarning(r, "noisy machine") || !hasWarning(r, "15.0%") {
		t.Errorf("cv 15%%: warnings %q", r.Warnings)
	}
	r.CV = 0.05
	r.Warnings = assess(r)
	if hasWarning(r, "noisy machine") {
		t.Errorf("cv 5%%: warnings %q", r.Warnings)
	}
}

func TestTooStableWarning(t *testing.T) {
	for _, tc := range []struct {
		loop   string
		rounds int
		cv     float64
		warn   bool
	}{
		{"closed", 3, 0, true},      // identical rounds: paced by something
		{"closed", 3, 0.0015, true}, // just under the bound
		{"closed", 3, 0.002, false}, // at the bound
		{"closed", 3, 0.05, false},  // ordinary variation
		{"closed", 2, 0, false},     // too few rounds to judge
		{"open", 3, 0, false},       // open loop is paced by design
	} {
		r := steady(100)
		r.Loop, r.CV = tc.loop, tc.cv
		r.PerRound = r.PerRound[:tc.rounds]
		r.Warnings = assess(r)
		if got := hasWarning(r, "too stable"); got != tc.warn {
			t.Errorf("%s loop, %d rounds, cv %v: warning %v, want %v (%q)", tc.loop, tc.rounds, tc.cv, got, tc.warn, r.Warnings)
		}
	}
}

func TestShortRoundWarning(t *testing.T) {
	r := steady(100)
	for i := range r.PerRound {
		r.PerRound[i].Seconds = 0.2
	}
	r.Warnings = assess(r)
	if !hasWarning(r, "short rounds") {
		t.Errorf("0.2 s rounds: warnings %q", r.Warnings)
	}
}

func TestNoWarningsEncodeAsEmptyList(t *testing.T) {
	r := steady(100)
	r.SetCeiling("ping", 1000)
	if len(r.Warnings) != 0 {
		t.Fatalf("warnings %q, want none", r.Warnings)
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"warnings":[]`) {
		t.Errorf("%s: want an empty warnings list", data)
	}
}

func TestSummaryPrefixesWarnings(t *testing.T) {
	a, b := steady(95), steady(10)
	a.SetCeiling("ping", 100)
	b.Op = "create"
	b.SetCeiling("ping", 100)
	s := Summarize("meta", "all", []*Result{a, b})
	if len(s.Phases) != 2 || s.CeilingOpsPerSec != 100 || s.Op != "all" {
		t.Errorf("summary %+v", s)
	}
	if len(s.Warnings) != 1 || !strings.HasPrefix(s.Warnings[0], "stat: measuring the harness") {
		t.Errorf("summary warnings %q", s.Warnings)
	}
}
