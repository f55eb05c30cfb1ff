package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
)

// SweepCSVHeader names the columns of WriteSweepCSV. Step rows (kind step
// or refine) carry their step number and verdict; hold rows (kind hold)
// carry the end of their interval in seconds since the hold began.
var SweepCSVHeader = []string{
	"kind", "step", "second", "target_ops_per_sec", "achieved_ops_per_sec", "ops", "errors", "backlog",
	"p50_us", "p90_us", "p99_us", "p999_us", "max_us", "sustainable",
}

// WriteSweepCSV writes the header, one row per step, then one row per
// interval of the hold.
func WriteSweepCSV(w io.Writer, r *SweepResult) error {
	cw := csv.NewWriter(w)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	d := func(v int64) string { return strconv.FormatInt(v, 10) }
	if err := cw.Write(SweepCSVHeader); err != nil {
		return err
	}
	for _, st := range r.Steps {
		err := cw.Write([]string{
			st.Kind, d(int64(st.Step)), "", f(st.TargetOpsPerSec), f(st.OpsPerSec), d(st.Ops), d(st.Errors), d(st.Backlog),
			f(st.P50Us), f(st.P90Us), f(st.P99Us), f(st.P999Us), f(st.MaxUs), strconv.FormatBool(st.Sustainable),
		})
		if err != nil {
			return err
		}
	}
	for _, iv := range r.PerSecond {
		err := cw.Write([]string{
			"hold", "", f(iv.Second), f(iv.TargetOpsPerSec), f(iv.OpsPerSec), d(iv.Ops), d(iv.Errors), d(iv.Backlog),
			f(iv.P50Us), f(iv.P90Us), f(iv.P99Us), f(iv.P999Us), f(iv.MaxUs), "",
		})
		if err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// SaveSweepCSV writes r to the file at path, replacing what was there: a
// sweep's rows only make sense together.
func SaveSweepCSV(path string, r *SweepResult) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("csv: %w", cerr)
		}
	}()
	if err := WriteSweepCSV(f, r); err != nil {
		return fmt.Errorf("csv %s: %w", path, err)
	}
	return nil
}

// WriteSweepTable prints a sweep for a reader: the steps, the maximum,
// the hold per interval and in total, the ceiling and the warnings.
func WriteSweepTable(w io.Writer, r *SweepResult) error {
	from := fmt.Sprintf("from %.0f ops/s", r.StartOpsPerSec)
	if r.ClosedLoopOpsPerSec > 0 {
		from = fmt.Sprintf("from %.0f ops/s (%.0f%% of the closed loop's %.0f)", r.StartOpsPerSec, 100*DefaultSweepStartFraction, r.ClosedLoopOpsPerSec)
	}
	fmt.Fprintf(w, "sweep %s: %d threads over %d conn(s), open loop, steps of %gs x%g %s\n",
		r.Op, r.Clients, r.Conns, r.StepSec, r.StepFactor, from)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\ttarget/s\tachieved/s\tbacklog\terrors\tp50\tp90\tp99\tp99.9\tmax\t\tverdict")
	for _, st := range r.Steps {
		name := strconv.Itoa(st.Step)
		if st.Kind == "refine" {
			name += " (refine)"
		}
		verdict := "keeps up"
		if !st.Sustainable {
			verdict = "no: " + st.Reason
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\t%s\n", name, st.TargetOpsPerSec, st.OpsPerSec, st.Backlog, st.Errors,
			fmtUs(st.P50Us), fmtUs(st.P90Us), fmtUs(st.P99Us), fmtUs(st.P999Us), fmtUs(st.MaxUs), verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.MaxOpsPerSec == 0 {
		fmt.Fprintln(w, "no step kept up: there is no maximum to hold")
		for _, warning := range r.Warnings {
			fmt.Fprintf(w, "warning: %s\n", warning)
		}
		return nil
	}
	bound := fmt.Sprintf("%gx the first sustainable step's p99, at least %s", float64(P99BoundFactor), fmtUs(float64(MinP99Bound.Microseconds())))
	if r.SLO {
		bound = "--slo"
	}
	fmt.Fprintf(w, "maximum sustainable: %.0f ops/s (a step keeps up when it achieves %.0f%% of its target, leaves at most %.0f%% unsent, fails at most %.0f%%, and its p99 stays under %s: %s)\n",
		r.MaxOpsPerSec, 100*SustainShare, 100*SustainBacklog, 100*SustainErrors, fmtUs(r.P99BoundUs), bound)
	if len(r.PerSecond) > 0 {
		fmt.Fprintf(w, "\nhold at %.0f%% of the maximum: %.0f ops/s for %gs\n", 100*r.HoldFraction, r.HoldTargetOpsPerSec, r.HoldSec)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "second\tachieved/s\terrors\tp50\tp90\tp99\tp99.9\tmax\t")
		for _, iv := range r.PerSecond {
			fmt.Fprintf(tw, "%g\t%.0f\t%d\t%s\t%s\t%s\t%s\t%s\t\n", iv.Second, iv.OpsPerSec, iv.Errors,
				fmtUs(iv.P50Us), fmtUs(iv.P90Us), fmtUs(iv.P99Us), fmtUs(iv.P999Us), fmtUs(iv.MaxUs))
		}
		fmt.Fprintf(tw, "all\t%.0f\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.HoldOpsPerSec, r.HoldErrors,
			fmtUs(r.HoldP50Us), fmtUs(r.HoldP90Us), fmtUs(r.HoldP99Us), fmtUs(r.HoldP999Us), fmtUs(r.HoldMaxUs))
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.CeilingOpsPerSec > 0 {
		fmt.Fprintf(w, "ceiling: %.0f ops/s (%s, closed loop at the same concurrency); the maximum is %s of it\n",
			r.CeilingOpsPerSec, r.CeilingOp, fmtShare(r.MaxOpsPerSec/r.CeilingOpsPerSec))
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	return nil
}
