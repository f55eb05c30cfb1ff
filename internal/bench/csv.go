package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// CSVHeader names the columns of WriteCSV, one row per round.
var CSVHeader = []string{
	"start", "mode", "op", "loop", "clients", "conns", "target_ops_per_sec", "round", "seconds",
	"ops", "errors", "backlog", "ops_per_sec", "mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us",
	"ceiling_op", "ceiling_ops_per_sec", "harness_share",
}

// WriteCSV writes one row per round of every result, after the header if
// header is set.
func WriteCSV(w io.Writer, header bool, results ...*Result) error {
	cw := csv.NewWriter(w)
	if header {
		if err := cw.Write(CSVHeader); err != nil {
			return err
		}
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	d := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range results {
		for _, rd := range r.PerRound {
			share := 0.0
			if r.CeilingOpsPerSec > 0 {
				share = rd.OpsPerSec / r.CeilingOpsPerSec
			}
			err := cw.Write([]string{
				rd.Start.UTC().Format(time.RFC3339Nano), r.Mode, r.Op, r.Loop, d(int64(r.Clients)), d(int64(r.Conns)),
				f(r.TargetRate), d(int64(rd.Round)), f(rd.Seconds),
				d(rd.Ops), d(rd.Errors), d(rd.Backlog), f(rd.OpsPerSec),
				f(rd.MeanUs), f(rd.P50Us), f(rd.P90Us), f(rd.P99Us), f(rd.P999Us), f(rd.MaxUs),
				r.CeilingOp, f(r.CeilingOpsPerSec), f(share),
			})
			if err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// AppendCSV appends the rows of results to the file at path, creating it
// with a header if it is new or empty, so several runs gather in one file.
func AppendCSV(path string, results ...*Result) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("csv: %w", cerr)
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	if err := WriteCSV(f, fi.Size() == 0, results...); err != nil {
		return fmt.Errorf("csv %s: %w", path, err)
	}
	return nil
}
