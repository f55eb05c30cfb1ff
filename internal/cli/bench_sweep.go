package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/internal/bench"
)

func newBenchSweepCmd(g *globals) *cobra.Command {
	var cfg bench.SweepRunConfig
	var conns, threads, refine int
	var jsonOut bool
	var csvFile, plotFile string
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Find the highest rate the server sustains, then hold a share of it and watch latency",
		Long: `Find the highest rate at which the server sustains --op in an open loop,
then hold --hold of it for --hold-duration and report the latency of every
second. Latency runs from each operation's intended send time, so queueing
counts.

The steps start at --start (by default a quarter of the rate a closed loop
reaches at the same concurrency) and multiply the rate by --step, each
lasting --step-duration, until one does not keep up; if the first does not,
they divide instead. A step keeps up when it achieves 95% of its target,
leaves at most 1% of its sends unissued, fails at most 1% of them, and its
p99 stays under --slo (by default 10x the p99 of the first step that kept
up, at least 1ms). --refine bisection steps then narrow the gap between the
last step that kept up and the first that did not; the maximum is the
highest target that kept up. See docs/bench.md.`,
		Example: "  canopy bench sweep --op stat --threads 16 --csv sweep.csv --plot sweep.png\n" +
			"  canopy bench sweep --op create --start 2k --step 1.25 --slo 20ms --json\n" +
			"  canopy bench sweep --op null --hold 0.5 --hold-duration 2m",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if plotFile != "" {
				if err := checkPlotFile(plotFile); err != nil {
					return err
				}
			}
			switch {
			case cfg.Sweep.Hold <= 0 || cfg.Sweep.Hold > 1:
				return fmt.Errorf("--hold %v: want a share above 0 and at most 1", cfg.Sweep.Hold)
			case cfg.Sweep.Step <= 1:
				return fmt.Errorf("--step %v: want a factor above 1", cfg.Sweep.Step)
			case cfg.Sweep.StepDuration <= 0 || cfg.Sweep.HoldDuration <= 0:
				return fmt.Errorf("--step-duration %v, --hold-duration %v: want positive durations", cfg.Sweep.StepDuration, cfg.Sweep.HoldDuration)
			case cfg.Sweep.SLO < 0 || cfg.Sweep.Warmup < 0 || cfg.CeilingTime < 0:
				return fmt.Errorf("--slo, --warmup and --ceiling-time must not be negative")
			}
			cfg.Sweep.Refine = refine
			if refine == 0 {
				cfg.Sweep.Refine = -1 // none; 0 would be the default
			}
			opts, err := g.clientOptions()
			if err != nil {
				return err
			}
			opts.OpTimeout = g.timeout
			cs, err := bench.Dial(g.addr, opts, conns)
			if err != nil {
				return err
			}
			defer cs.Close()
			ctx, stop := interruptible()
			defer stop()
			cfg.Conns = cs
			cfg.Sweep.Workers, cfg.Sweep.Progress = threads, cmd.ErrOrStderr()
			cfg.Dir = canonIfSet(cfg.Dir)
			res, runErr := bench.RunSweep(ctx, cfg)
			if res == nil {
				return runErr
			}
			if csvFile != "" {
				if err := bench.SaveSweepCSV(csvFile, res); err != nil {
					return err
				}
			}
			if plotFile != "" && len(res.PerSecond) > 0 {
				if err := bench.SaveSweepPlot(plotFile, res); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				err = bench.WriteJSON(out, res)
			} else {
				err = bench.WriteSweepTable(out, res)
			}
			if err != nil {
				return err
			}
			return runErr
		},
	}
	fl := cmd.Flags()
	threads, conns, cfg.Files = 16, 1, bench.DefaultFiles
	cfg.Sweep.Step, cfg.Sweep.MaxSteps, cfg.Sweep.StepDuration = bench.DefaultSweepStep, bench.DefaultSweepMaxSteps, bench.DefaultSweepStepDuration
	refine, cfg.Sweep.Hold, cfg.Sweep.HoldDuration = bench.DefaultSweepRefine, bench.DefaultSweepHold, bench.DefaultSweepHoldDuration
	fl.StringVar(&cfg.Op, "op", "stat", "stat, create or null")
	fl.Var(intCount{&threads, 1}, "threads", "concurrent threads, each with one operation in flight")
	fl.Var(intCount{&conns, 1}, "conns", "client connections the threads share (each is multiplexed)")
	fl.Var(floatCount{&cfg.Sweep.Start}, "start", "first step's rate in ops/s (0 = a quarter of the closed-loop rate, measured first)")
	fl.Float64Var(&cfg.Sweep.Step, "step", cfg.Sweep.Step, "factor from one step's rate to the next (above 1)")
	fl.Var(intCount{&cfg.Sweep.MaxSteps, 1}, "max-steps", "steps at most before the refinement")
	fl.DurationVar(&cfg.Sweep.StepDuration, "step-duration", cfg.Sweep.StepDuration, "how long each step lasts")
	fl.Var(intCount{&refine, 0}, "refine", "bisection steps between the last rate that kept up and the first that did not")
	fl.DurationVar(&cfg.Sweep.SLO, "slo", 0, "p99 a step must stay under (0 = 10x the first sustainable step's p99, at least 1ms)")
	fl.Float64Var(&cfg.Sweep.Hold, "hold", cfg.Sweep.Hold, "share of the maximum to hold (0 to 1)")
	fl.DurationVar(&cfg.Sweep.HoldDuration, "hold-duration", cfg.Sweep.HoldDuration, "how long the hold lasts")
	fl.DurationVar(&cfg.Sweep.Warmup, "warmup", time.Second, "closed-loop run before the first measurement, and settling at the hold's rate (at most a step) before the hold (0 = none)")
	fl.DurationVar(&cfg.CeilingTime, "ceiling-time", 2*time.Second, "how long the harness ceiling is measured (0 = skip)")
	fl.Var(intCount{&cfg.Files, 1}, "files", "stat: files per thread, created first")
	fl.StringVar(&cfg.Dir, "dir", "", "stat, create: directory the tree goes under (default /bench-<random>)")
	fl.BoolVar(&cfg.Keep, "keep", false, "leave the tree in place afterwards")
	fl.BoolVar(&jsonOut, "json", false, "print the result as one JSON object on the last line")
	fl.StringVar(&csvFile, "csv", "", "write one row per step and per second of the hold to this CSV file (replaced)")
	fl.StringVar(&plotFile, "plot", "", "draw the hold's latency per second to this .png or .svg file")
	return cmd
}

// checkPlotFile refuses a plot file whose format cannot be drawn before
// the sweep spends its minute.
func checkPlotFile(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg":
		return nil
	default:
		return fmt.Errorf("--plot %s: want a .png or .svg file", path)
	}
}
