package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteMemoryTable prints a memory benchmark's result for a reader.
func WriteMemoryTable(w io.Writer, r *MemoryResult) error {
	fmt.Fprintf(w, "memory: %d files in %d directories (%d nodes) built in one engine in %.2fs (%.0f files/s)\n",
		r.Files, r.Dirs, r.Nodes, r.BuildSeconds, r.FilesPerSec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tbefore\tafter\tper file\t")
	fmt.Fprintf(tw, "resident\t%s\t%s\t%.1f B\t\n", mib(r.RSSBeforeBytes), mib(r.RSSAfterBytes), r.RSSBytesPerFile)
	fmt.Fprintf(tw, "Go heap in use\t%s\t%s\t%.1f B\t\n", mib(r.HeapBeforeBytes), mib(r.HeapAfterBytes), r.HeapBytesPerFile)
	if r.RSSAfterIdleBytes != nil {
		fmt.Fprintf(tw, "resident after idle compaction\t\t%s\t%.1f B\t\n", mib(*r.RSSAfterIdleBytes), *r.RSSBytesPerFileAfterIdle)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.IdleSeconds != nil {
		fmt.Fprintf(w, "idle compaction: %d entries in %d steps, %.2fs\n", *r.IdleEntries, *r.IdleSteps, *r.IdleSeconds)
	}
	fmt.Fprintf(w, "GC during the build: %d cycles, %d pauses, p50 %s, p99 %s, max %s (bucket upper bounds); longest cycle %s\n",
		r.GCCycles, r.GCPauses, fmtUs(r.GCPauseP50Us), fmtUs(r.GCPauseP99Us), fmtUs(r.GCPauseMaxUs), fmtUs(r.GCCycleMaxUs))
	fmt.Fprintf(w, "getattr: mean %.0f ns, p99 %.0f ns (%d random files)\n", r.GetattrNs, r.GetattrP99Ns, r.GetattrSamples)
	_, err := fmt.Fprintf(w, "lookup:  mean %.0f ns, p99 %.0f ns (%d random files)\n", r.LookupNs, r.LookupP99Ns, r.LookupSamples)
	return err
}

// mib formats a byte count in MiB with one decimal.
func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
