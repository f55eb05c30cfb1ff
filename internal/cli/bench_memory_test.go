package cli

import (
	"strings"
	"testing"
)

// TestBenchMemoryCommand runs `canopy bench memory` on a small tree and
// checks the JSON line and the table.
func TestBenchMemoryCommand(t *testing.T) {
	m := lastJSON(t, mustCanopy(t, "127.0.0.1:1", "bench", "memory", "--files", "20k", "--dirs", "40", "--samples", "2k", "--json"))
	for _, key := range []string{"files", "dirs", "rss_bytes_per_file", "heap_bytes_per_file", "build_seconds",
		"gc_pause_p50_us", "gc_pause_p99_us", "gc_pause_max_us", "getattr_ns", "lookup_ns"} {
		if _, ok := m[key]; !ok {
			t.Errorf("no %q in %v", key, m)
		}
	}
	if m["files"] != 20000.0 || m["dirs"] != 40.0 || m["mode"] != "memory" {
		t.Errorf("files %v dirs %v mode %v, want 20000, 40, memory", m["files"], m["dirs"], m["mode"])
	}
	before, after := m["rss_before_bytes"].(float64), m["rss_after_bytes"].(float64)
	if per := m["rss_bytes_per_file"].(float64); after <= before || per != (after-before)/20000 {
		t.Errorf("resident %v -> %v bytes, %v per file", before, after, per)
	}
	out := mustCanopy(t, "127.0.0.1:1", "bench", "memory", "--files", "5000", "--samples", "1000")
	if !strings.Contains(out, "memory: 5000 files in 5 directories") || !strings.Contains(out, "lookup:") {
		t.Errorf("table:\n%s", out)
	}
	if _, err := canopy(t, "127.0.0.1:1", "bench", "memory", "--files", "10", "--dirs", "11"); err == nil {
		t.Error("more directories than files accepted")
	}
}

// TestBenchMemorySave: --save leaves a metadata directory with the tree's
// checkpoint, and is refused, before any build, for a directory that
// holds something.
func TestBenchMemorySave(t *testing.T) {
	dir := t.TempDir() + "/meta"
	mustCanopy(t, "127.0.0.1:1", "bench", "memory", "--files", "1000", "--samples", "100", "--save", dir)
	infos, err := listCheckpointFiles(dir)
	if err != nil || len(infos) != 1 || infos[0].Index != 0 || infos[0].Size == 0 {
		t.Fatalf("checkpoints in %s: %+v, %v; want one at index 0", dir, infos, err)
	}
	out, err := canopy(t, "127.0.0.1:1", "bench", "memory", "--files", "1000", "--save", dir)
	if err == nil || !strings.Contains(out+err.Error(), "not empty") {
		t.Fatalf("a second save into %s: %v\n%s", dir, err, out)
	}
}
