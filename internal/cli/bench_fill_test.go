package cli

import (
	"strings"
	"testing"
)

// TestFillShowsOnMetrics fills a metadata server with `canopy bench fill`
// and checks that its metrics endpoint shows the process's resident
// memory and a node count grown by exactly the tree's nodes.
func TestFillShowsOnMetrics(t *testing.T) {
	addr, metricsAddr := serveWithMetrics(t)
	series := []string{`process_resident_memory_bytes`, `canopy_meta_inodes`}
	before := scrape(t, metricsAddr, series...)
	m := lastJSON(t, mustCanopy(t, addr, "bench", "fill", "--files", "3000", "--dirs", "7", "--workers", "8", "--conns", "2", "--json"))
	if m["files"] != 3000.0 || m["dirs"] != 7.0 || m["top"] != "/mdtest_tree.0" || m["files_per_sec"].(float64) <= 0 {
		t.Errorf("fill result %v", m)
	}
	after := scrape(t, metricsAddr, series...)
	if before[0] <= 0 || after[0] <= 0 {
		t.Errorf("resident memory %v then %v bytes", before[0], after[0])
	}
	// The top, its directories and the files.
	if got, want := after[1]-before[1], 3000.0+7+1; got != want {
		t.Errorf("canopy_meta_inodes grew by %v (%v to %v), want %v", got, before[1], after[1], want)
	}
	out := mustCanopy(t, addr, "ls", "/mdtest_tree.0/mdtest_tree.7")
	if n := strings.Count(out, "file.mdtest.0."); n != 428 {
		t.Errorf("last directory lists %d files, want 428 (3000 over 7, the first 4 with one more):\n%s", n, out)
	}
	if _, err := canopy(t, addr, "bench", "fill", "--files", "10"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second fill into the same place: %v, want an error saying the tree exists", err)
	}
}
