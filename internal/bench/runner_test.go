package bench

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// costly is a one-worker workload whose i-th operation costs cost(i) on
// clk.
func costly(clk *fakeClock, cost func(i int) time.Duration) Workload {
	i := 0
	return Func(func(context.Context, int) error {
		clk.Advance(cost(i))
		i++
		return nil
	})
}

func TestClosedLoopRateAndLatency(t *testing.T) {
	clk := newFakeClock()
	cfg := Config{Workers: 1, Duration: time.Second, Rounds: 3, clock: clk}
	res, err := Run(context.Background(), cfg, costly(clk, func(int) time.Duration { return 2 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PerRound) != 3 || res.Rounds != 3 {
		t.Fatalf("%d rounds, want 3", len(res.PerRound))
	}
	for _, rd := range res.PerRound {
		if rd.Ops != 500 || rd.Seconds != 1 || rd.OpsPerSec != 500 {
			t.Errorf("round %d: %d ops in %vs = %v ops/s, want 500 in 1s", rd.Round, rd.Ops, rd.Seconds, rd.OpsPerSec)
		}
	}
	if res.Ops != 1500 || res.OpsPerSec != 500 || res.CV != 0 || res.StddevOpsPerSec != 0 {
		t.Errorf("total %d ops, %v ops/s, cv %v; want 1500, 500, 0", res.Ops, res.OpsPerSec, res.CV)
	}
	for name, v := range map[string]float64{"p50": res.P50Us, "p99": res.P99Us, "max": res.MaxUs, "mean": res.MeanUs} {
		if !near(v, 2000, 0.002) {
			t.Errorf("%s = %vµs, want 2000µs", name, v)
		}
	}
	// Rounds paced by a fake clock agree exactly: that is the one warning.
	if res.Loop != "closed" || res.Backlog != 0 || len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "too stable") {
		t.Errorf("loop %s, backlog %d, warnings %q", res.Loop, res.Backlog, res.Warnings)
	}
}

func TestPercentiles(t *testing.T) {
	// Latencies 100µs, 200µs, ... 10ms, ten times over: 1000 operations
	// that take exactly 5.05 s.
	clk := newFakeClock()
	cfg := Config{Workers: 1, Duration: 5050 * time.Millisecond, Rounds: 1, clock: clk}
	res, err := Run(context.Background(), cfg, costly(clk, func(i int) time.Duration {
		return time.Duration(i%100+1) * 100 * time.Microsecond
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 1000 || !near(res.OpsPerSec, 1000/5.05, 1e-9) {
		t.Fatalf("%d ops at %v ops/s, want 1000 at %v", res.Ops, res.OpsPerSec, 1000/5.05)
	}
	want := map[string][2]float64{
		"mean": {res.MeanUs, 5050}, "p50": {res.P50Us, 5000}, "p90": {res.P90Us, 9000},
		"p99": {res.P99Us, 9900}, "p99.9": {res.P999Us, 10000}, "max": {res.MaxUs, 10000},
	}
	for name, gw := range want {
		if !near(gw[0], gw[1], 0.002) {
			t.Errorf("%s = %vµs, want %vµs", name, gw[0], gw[1])
		}
	}
}

// The open loop measures from each operation's intended send time. One
// worker at 1000 ops/s on an operation that takes 2 ms serves ticket k
// (due at k ms) at 2k ms, so its latency is k+2 ms and grows for as long
// as the round lasts; the 500 tickets it never got to count as late as
// they are at the end. The closed loop on the same operation sees 2 ms
// throughout: it only ever asks as fast as the server answers.
func TestOpenLoopCountsQueueingDelay(t *testing.T) {
	op := func(int) time.Duration { return 2 * time.Millisecond }
	clk := newFakeClock()
	open, err := Run(context.Background(), Config{Workers: 1, Rate: 1000, Duration: time.Second, Rounds: 1, clock: clk}, costly(clk, op))
	if err != nil {
		t.Fatal(err)
	}
	clk = newFakeClock()
	closed, err := Run(context.Background(), Config{Workers: 1, Duration: time.Second, Rounds: 1, clock: clk}, costly(clk, op))
	if err != nil {
		t.Fatal(err)
	}
	if open.Loop != "open" || open.TargetRate != 1000 {
		t.Errorf("loop %s at %v, want open at 1000", open.Loop, open.TargetRate)
	}
	if open.Ops != 500 || open.OpsPerSec != 500 || open.Backlog != 500 {
		t.Errorf("open: %d ops at %v ops/s, backlog %d; want 500, 500, 500", open.Ops, open.OpsPerSec, open.Backlog)
	}
	// Served: 2..501 ms; never sent: 1..500 ms late by the end.
	if !near(open.MaxUs, 501_000, 0.002) || !near(open.P50Us, 250_000, 0.01) {
		t.Errorf("open: p50 %vµs, max %vµs; want 250ms, 501ms", open.P50Us, open.MaxUs)
	}
	if !near(closed.P50Us, 2000, 0.002) || !near(closed.MaxUs, 2000, 0.002) {
		t.Errorf("closed: p50 %vµs, max %vµs; want 2ms", closed.P50Us, closed.MaxUs)
	}
	if !hasWarning(open, "open loop fell behind") {
		t.Errorf("open warnings %q lack the backlog", open.Warnings)
	}
}

// At a rate far past anything served, the sends never issued are counted
// in bulk: 200 million intended in 2 s, two served (each takes 1 s), the
// rest waiting evenly from 0 to 2 s.
func TestOpenLoopHugeBacklog(t *testing.T) {
	clk := newFakeClock()
	res, err := Run(context.Background(), Config{Workers: 1, Rate: 1e8, Duration: 2 * time.Second, Rounds: 1, clock: clk},
		costly(clk, func(int) time.Duration { return time.Second }))
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 2 || res.Backlog != 2e8-2 {
		t.Errorf("%d ops, backlog %d; want 2 and %d", res.Ops, res.Backlog, int64(2e8-2))
	}
	if !near(res.P50Us, 1e6, 0.01) || !near(res.MaxUs, 2e6, 0.01) {
		t.Errorf("p50 %vµs, max %vµs; want 1 s and 2 s", res.P50Us, res.MaxUs)
	}
}

func TestOpenLoopBelowCapacity(t *testing.T) {
	clk := newFakeClock()
	res, err := Run(context.Background(), Config{Workers: 1, Rate: 100, Duration: time.Second, Rounds: 2, clock: clk},
		costly(clk, func(int) time.Duration { return 2 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 200 || res.Backlog != 0 || !near(res.OpsPerSec, 100, 0.01) {
		t.Errorf("%d ops at %v ops/s, backlog %d; want 200 at 100, none", res.Ops, res.OpsPerSec, res.Backlog)
	}
	if !near(res.MaxUs, 2000, 0.002) {
		t.Errorf("max %vµs, want 2ms: the loop sends on time, so nothing queues", res.MaxUs)
	}
}

// The same on the real clock, with an operation that sleeps: past its
// capacity the open loop's latencies grow far beyond the operation's
// cost, while the closed loop's stay near it. Only orderings are checked.
func TestCoordinatedOmissionRealClock(t *testing.T) {
	const cost = 5 * time.Millisecond
	sleep := Func(func(ctx context.Context, _ int) error {
		time.Sleep(cost)
		return nil
	})
	// Two workers serve at most 400 ops/s; ask for four times that.
	cfg := Config{Workers: 2, Duration: 400 * time.Millisecond, Rounds: 1}
	closed, err := Run(context.Background(), cfg, sleep)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Rate = 1600
	open, err := Run(context.Background(), cfg, sleep)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("closed: p50 %s p99 %s max %s; open: p50 %s p99 %s max %s, backlog %d",
		fmtUs(closed.P50Us), fmtUs(closed.P99Us), fmtUs(closed.MaxUs), fmtUs(open.P50Us), fmtUs(open.P99Us), fmtUs(open.MaxUs), open.Backlog)
	if closed.P50Us < float64(cost.Microseconds()) {
		t.Errorf("closed p50 %vµs is below the %v the operation sleeps", closed.P50Us, cost)
	}
	if open.P50Us < 3*closed.P50Us {
		t.Errorf("open p50 %vµs, closed p50 %vµs: the open loop hides its queueing delay", open.P50Us, closed.P50Us)
	}
	if open.P99Us <= open.P50Us || open.Backlog == 0 || closed.Backlog != 0 {
		t.Errorf("open p99 %vµs, p50 %vµs, backlog %d; closed backlog %d", open.P99Us, open.P50Us, open.Backlog, closed.Backlog)
	}
}

func TestWarmupIsNotMeasured(t *testing.T) {
	clk := newFakeClock()
	var calls atomic.Int64
	var phases []int
	wl := &workerFunc{
		prepare: func(phase int) { phases = append(phases, phase) },
		do: func(int) error {
			calls.Add(1)
			clk.Advance(time.Millisecond)
			return nil
		},
	}
	res, err := Run(context.Background(), Config{Workers: 1, Duration: 200 * time.Millisecond, Warmup: 100 * time.Millisecond, Rounds: 2, clock: clk}, wl)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 500 || res.Ops != 400 {
		t.Errorf("%d calls, %d measured; want 500 and 400", calls.Load(), res.Ops)
	}
	if len(phases) != 3 || phases[0] != 0 || phases[1] != 1 || phases[2] != 2 {
		t.Errorf("prepared phases %v, want [0 1 2]", phases)
	}
}

func TestExhaustedWorkersEndTheRound(t *testing.T) {
	// Each round gives each of 4 workers 10 items; the round must end when
	// they are used up, long before its minute.
	left := make([]int, 4)
	wl := &workerFunc{
		prepare: func(int) {
			for w := range left {
				left[w] = 10
			}
		},
		do: func(w int) error {
			if left[w] == 0 {
				return ErrExhausted
			}
			left[w]--
			return nil
		},
	}
	res, err := Run(context.Background(), Config{Workers: 4, Duration: time.Minute, Rounds: 2}, wl)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 80 || res.Errors != 0 {
		t.Errorf("%d ops, %d errors; want 80 and 0", res.Ops, res.Errors)
	}
	for _, rd := range res.PerRound {
		if rd.Seconds > 30 {
			t.Errorf("round %d lasted %vs: exhausted workers did not end it", rd.Round, rd.Seconds)
		}
	}
}

// workerFunc is a workload built from functions.
type workerFunc struct {
	prepare func(phase int)
	do      func(w int) error
}

func (f *workerFunc) Prepare(_ context.Context, phase int) error { f.prepare(phase); return nil }
func (f *workerFunc) Do(_ context.Context, w int) error          { return f.do(w) }

func TestFailuresAreCounted(t *testing.T) {
	clk := newFakeClock()
	boom := errors.New("boom")
	i := 0
	res, err := Run(context.Background(), Config{Workers: 1, Duration: 30 * time.Millisecond, Rounds: 1, clock: clk},
		Func(func(context.Context, int) error {
			clk.Advance(time.Millisecond)
			i++
			if i%3 == 0 {
				return boom
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 20 || res.Errors != 10 || res.FirstError != "boom" {
		t.Errorf("%d ops, %d errors, first %q; want 20, 10, boom", res.Ops, res.Errors, res.FirstError)
	}
	if !hasWarning(res, "10 of 30 operations failed (first: boom)") {
		t.Errorf("warnings %q", res.Warnings)
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := Run(ctx, Config{Workers: 1, Duration: time.Minute, Rounds: 1}, Func(func(context.Context, int) error {
		if n++; n == 100 {
			cancel()
		}
		return nil
	}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func TestConfigIsChecked(t *testing.T) {
	nop := Func(func(context.Context, int) error { return nil })
	for _, cfg := range []Config{
		{Workers: 0, Duration: time.Second},
		{Workers: 1, Duration: 0},
		{Workers: 1, Duration: time.Second, Rate: -1},
		{Workers: 1, Duration: time.Second, Rounds: -1},
		{Workers: 1, Duration: time.Second, Warmup: -time.Second},
	} {
		if _, err := Run(context.Background(), cfg, nop); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func hasWarning(r *Result, sub string) bool {
	for _, w := range r.Warnings {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}
