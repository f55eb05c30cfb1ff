package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints results for a reader: a header line per result, a row
// per round, the mean over the rounds, the ceiling, and the warnings.
func WriteTable(w io.Writer, results ...*Result) error {
	for i, r := range results {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := writeTable(w, r); err != nil {
			return err
		}
	}
	return nil
}

func writeTable(w io.Writer, r *Result) error {
	loop := "closed loop"
	if r.Loop == "open" {
		loop = fmt.Sprintf("open loop at %.0f ops/s", r.TargetRate)
	}
	who := "clients"
	if r.Mode == "meta" {
		who = "threads"
	}
	fmt.Fprintf(w, "%s %s: %d %s over %d conn(s), %s, %d round(s) of up to %gs (warm-up %gs)\n",
		r.Mode, r.Op, r.Clients, who, r.Conns, loop, r.Rounds, r.DurationSec, r.WarmupSec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tops/s\tops\terrors\tmean\tp50\tp90\tp99\tp99.9\tmax\t")
	for _, rd := range r.PerRound {
		fmt.Fprintf(tw, "%d\t%.0f\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", rd.Round, rd.OpsPerSec, rd.Ops, rd.Errors,
			fmtUs(rd.MeanUs), fmtUs(rd.P50Us), fmtUs(rd.P90Us), fmtUs(rd.P99Us), fmtUs(rd.P999Us), fmtUs(rd.MaxUs))
	}
	fmt.Fprintf(tw, "all\t%.0f ±%.1f%%\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.OpsPerSec, 100*r.CV, r.Ops, r.Errors,
		fmtUs(r.MeanUs), fmtUs(r.P50Us), fmtUs(r.P90Us), fmtUs(r.P99Us), fmtUs(r.P999Us), fmtUs(r.MaxUs))
	if err := tw.Flush(); err != nil {
		return err
	}
	if n, ok := r.Params["entries"].(int); ok {
		fmt.Fprintf(w, "entries listed: %.0f/s (%d per listing)\n", r.OpsPerSec*float64(n), n)
	}
	if r.CeilingOpsPerSec > 0 {
		fmt.Fprintf(w, "ceiling: %.0f ops/s (%s at the same concurrency); this result is %s of it\n",
			r.CeilingOpsPerSec, r.CeilingOp, fmtShare(r.HarnessShare))
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	return nil
}

// fmtUs formats a latency given in microseconds with a fitting unit.
func fmtUs(us float64) string {
	switch {
	case us < 10:
		return fmt.Sprintf("%.1fµs", us)
	case us < 1e3:
		return fmt.Sprintf("%.0fµs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2fms", us/1e3)
	default:
		return fmt.Sprintf("%.2fs", us/1e6)
	}
}

// fmtShare formats a fraction as a percentage, keeping small ones visible.
func fmtShare(f float64) string {
	if f < 0.01 {
		return fmt.Sprintf("%.2f%%", 100*f)
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}
