package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/canopyfs/canopy/internal/bench"
)

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running Canopy: null calls (rpc), metadata operations (meta), latency at a held rate (sweep)",
		Long: `Measure a running Canopy through the Go SDK. Each benchmark warms up, runs
several rounds, and reports the mean rate with its spread, HDR latency
percentiles, and the ceiling the harness itself reaches at the same
concurrency; results close to that ceiling, or whose rounds disagree, carry
warnings. sweep finds the highest rate the server sustains and holds a
fraction of it, reporting latency second by second. memory builds a
namespace inside this process and reports its memory per file; fill builds
the same namespace on a running server. See docs/bench.md.`,
	}
	cmd.AddCommand(newBenchRPCCmd(g), newBenchMetaCmd(g), newBenchSweepCmd(g), newBenchIOCmd(g), newBenchMemoryCmd(), newBenchFillCmd(g))
	return cmd
}

// benchFlags are the flags every benchmark shares.
type benchFlags struct {
	conns    int
	duration time.Duration
	warmup   time.Duration
	ceiling  time.Duration
	rounds   int
	rate     float64
	json     bool
	csv      string
}

func (f *benchFlags) bind(fs *pflag.FlagSet) {
	f.conns, f.rounds = 1, bench.DefaultRounds
	fs.Var(intCount{&f.conns, 1}, "conns", "client connections the callers share (each is multiplexed)")
	fs.DurationVar(&f.duration, "duration", 5*time.Second, "longest each round lasts")
	fs.DurationVar(&f.warmup, "warmup", time.Second, "unmeasured run before the first round (0 = none)")
	fs.DurationVar(&f.ceiling, "ceiling-time", 2*time.Second, "how long the harness ceiling is measured (0 = skip)")
	fs.Var(intCount{&f.rounds, 1}, "rounds", "measured rounds")
	fs.Var(floatCount{&f.rate}, "rate", "open loop: intended operations per second across all callers, latency measured from each intended send (0 = closed loop)")
	fs.BoolVar(&f.json, "json", false, "print the result as one JSON object on the last line")
	fs.StringVar(&f.csv, "csv", "", "append one row per round to this CSV file (header when new)")
}

// config is the runner's configuration for workers callers.
func (f *benchFlags) config(workers int, progress io.Writer) bench.Config {
	return bench.Config{
		Workers: workers, Rate: f.rate, Duration: f.duration, Warmup: f.warmup, Rounds: f.rounds,
		Progress: progress,
	}
}

// dial opens the connections the benchmark's callers share.
func (f *benchFlags) dial(g *globals) (bench.Conns, error) {
	opts, err := g.clientOptions()
	if err != nil {
		return nil, err
	}
	opts.OpTimeout = g.timeout
	return bench.Dial(g.addr, opts, f.conns)
}

// session dials the benchmark's connections and runs fn with them and a
// context that an interrupt cancels; the connections are closed after.
func (f *benchFlags) session(g *globals, fn func(ctx context.Context, cs bench.Conns) error) error {
	cs, err := f.dial(g)
	if err != nil {
		return err
	}
	defer cs.Close()
	ctx, stop := interruptible()
	defer stop()
	return fn(ctx, cs)
}

// report prints results (a table, or one JSON line: report's, when not
// nil) and appends them to the CSV file if one was named. A benchmark in
// which every operation failed is an error.
func (f *benchFlags) report(out io.Writer, results []*bench.Result, summary any) error {
	if f.csv != "" {
		if err := bench.AppendCSV(f.csv, results...); err != nil {
			return err
		}
	}
	var err error
	switch {
	case f.json && summary != nil:
		err = bench.WriteJSON(out, summary)
	case f.json && len(results) == 1:
		err = bench.WriteJSON(out, results[0])
	case !f.json:
		err = bench.WriteTable(out, results...)
	}
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Ops == 0 && r.Errors > 0 {
			return fmt.Errorf("bench %s %s: every operation failed; first: %s", r.Mode, r.Op, r.FirstError)
		}
	}
	return nil
}

// interruptible is a context that ends on the first SIGINT or SIGTERM; a
// second one stops the process as usual.
func interruptible() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// intCount is an int flag that takes plain numbers or k, m, g suffixes.
type intCount struct {
	v   *int
	min int
}

func (c intCount) String() string {
	if c.v == nil {
		return "0"
	}
	return strconv.Itoa(*c.v)
}

func (c intCount) Set(s string) error {
	v, err := bench.ParseCount(s)
	if err != nil {
		return err
	}
	if v != math.Trunc(v) || v > math.MaxInt32 {
		return fmt.Errorf("%q is not a whole count", s)
	}
	if int(v) < c.min {
		return fmt.Errorf("%q is below the minimum of %d", s, c.min)
	}
	*c.v = int(v)
	return nil
}

func (intCount) Type() string { return "count" }

// floatCount is a float flag that takes plain numbers or k, m, g suffixes.
type floatCount struct{ v *float64 }

func (c floatCount) String() string {
	if c.v == nil {
		return "0"
	}
	return strconv.FormatFloat(*c.v, 'g', -1, 64)
}

func (c floatCount) Set(s string) error {
	v, err := bench.ParseCount(s)
	if err != nil {
		return err
	}
	*c.v = v
	return nil
}

func (floatCount) Type() string { return "rate" }
