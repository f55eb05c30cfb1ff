package bench

import (
	"strings"
	"testing"
)

// ioResult is a measured io run: files of size bytes written by workers in
// writeSeconds, each file having a fixed cost of fixed seconds.
func ioResult(files, workers int, size int64, writeSeconds, fixed float64) *IOResult {
	r := &IOResult{Mode: "io", Files: files, Workers: workers, SizeBytes: size,
		WriteSeconds: writeSeconds, FixedCostSeconds: fixed}
	r.WriteMiBPerSec = float64(files) * float64(size) / (1 << 20) / writeSeconds
	r.assess()
	return r
}

func hasIOWarning(r *IOResult, prefix string) bool {
	for _, w := range r.Warnings {
		if strings.HasPrefix(w, prefix) {
			return true
		}
	}
	return false
}

// TestIOWarnings constructs a harness-bound run (many 4 KiB files whose
// time is nearly all fixed cost) and a byte-bound one (a few large files)
// and checks which warnings each carries, with the ceiling they imply.
func TestIOWarnings(t *testing.T) {
	// 10,000 files x 4 KiB, 16 workers, 4 ms fixed cost each: the fixed
	// cost alone takes 2.5 s; the run took 2.6 s.
	small := ioResult(10000, 16, 4<<10, 2.6, 0.004)
	if !near(small.CeilingMiBPerSec, 16/0.004*4.0/1024, 1e-9) {
		t.Errorf("small files: ceiling %v MiB/s", small.CeilingMiBPerSec)
	}
	if !hasIOWarning(small, "fixed cost dominates") || !hasIOWarning(small, "measuring the harness") {
		t.Errorf("small files, share %.2f of a %.1f MiB/s ceiling: warnings %q", small.HarnessShare, small.CeilingMiBPerSec, small.Warnings)
	}

	// 4 files x 1 GiB, 4 workers, the same fixed cost, 7 s of writing.
	large := ioResult(4, 4, 1<<30, 7, 0.004)
	if len(large.Warnings) != 0 {
		t.Errorf("large files: warnings %q, want none", large.Warnings)
	}
	if large.HarnessShare > 0.01 || large.FixedCostShare > 0.01 {
		t.Errorf("large files: harness share %v, fixed-cost share %v", large.HarnessShare, large.FixedCostShare)
	}

	// In between: a fixed cost of 30% of the time warns about it, but the
	// rate is far from the ceiling.
	mid := ioResult(1000, 8, 1<<20, 1.0, 0.0024)
	if !hasIOWarning(mid, "fixed cost dominates") || hasIOWarning(mid, "measuring the harness") {
		t.Errorf("1 MiB files: warnings %q", mid.Warnings)
	}
}
