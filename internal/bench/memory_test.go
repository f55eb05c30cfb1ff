package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/internal/engine"
)

func TestTreeLayout(t *testing.T) {
	tree, err := NewTree(10, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{tree.FilesIn(0), tree.FilesIn(1), tree.FilesIn(2)}; got[0] != 4 || got[1] != 3 || got[2] != 3 {
		t.Errorf("files per directory %v, want [4 3 3]", got)
	}
	if tree.DirName(0) != "mdtest_tree.1" || FileName(7) != "file.mdtest.0.7" {
		t.Errorf("names %q %q", tree.DirName(0), FileName(7))
	}
	// Random picks land on every file and on nothing else.
	seen := map[[2]int]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		k, i := tree.randomFile(rng)
		if k < 0 || k >= tree.Dirs || i < 0 || i >= tree.FilesIn(k) {
			t.Fatalf("random file %d/%d is not in the tree", k, i)
		}
		seen[[2]int{k, i}] = true
	}
	if len(seen) != tree.Files {
		t.Errorf("random picks reached %d of %d files", len(seen), tree.Files)
	}
	if d, err := NewTree(5500, 0); err != nil || d.Dirs != 5 {
		t.Errorf("default dirs for 5500 files: %v %v, want 5", d.Dirs, err)
	}
	if d, err := NewTree(10, 0); err != nil || d.Dirs != 1 {
		t.Errorf("default dirs for 10 files: %v %v, want 1", d.Dirs, err)
	}
	for _, bad := range [][2]int{{0, 1}, {10, 11}, {10, -1}} {
		if _, err := NewTree(bad[0], bad[1]); err == nil {
			t.Errorf("NewTree(%d, %d) accepted", bad[0], bad[1])
		}
	}
}

func TestPausesBetween(t *testing.T) {
	buckets := []float64{0, 1e-6, 2e-6, 4e-6, 8e-6, math.Inf(1)}
	before := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{5, 5, 5, 5, 5}}
	// 100 new pauses: 90 in (1, 2] µs, 9 in (2, 4], 1 in (4, 8].
	after := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{5, 95, 14, 6, 5}}
	p := pausesBetween(before, after)
	if p.Count != 100 || p.P50Us != 2 || p.P99Us != 4 || p.MaxUs != 8 {
		t.Errorf("pauses %+v, want 100, p50 2, p99 4, max 8", p)
	}
	// A pause in the unbounded bucket is reported as its lower bound.
	after.Counts[4] = 6
	if p := pausesBetween(before, after); p.MaxUs != 8 || p.Count != 101 {
		t.Errorf("pauses %+v, want max 8 from the last bucket", p)
	}
	if p := pausesBetween(after, after); p != (Pauses{}) {
		t.Errorf("no new pauses gave %+v", p)
	}
}

// fakeCompactor has entries left to compact and hands out at most budget
// of them per step.
type fakeCompactor struct {
	left, calls, maxBudget int
}

func (f *fakeCompactor) CompactIdle(budget int) int {
	f.calls++
	f.maxBudget = max(f.maxBudget, budget)
	n := min(f.left, budget)
	f.left -= n
	return n
}

func TestCompactIdleRunsToTheEnd(t *testing.T) {
	f := &fakeCompactor{left: 2500}
	steps, entries := compactIdle(f, IdleBudget)
	if steps != 3 || entries != 2500 || f.left != 0 || f.calls != 4 || f.maxBudget != IdleBudget {
		t.Errorf("steps %d entries %d left %d calls %d budget %d, want 3, 2500, 0, 4, %d",
			steps, entries, f.left, f.calls, f.maxBudget, IdleBudget)
	}
}

func TestRunMemory(t *testing.T) {
	const files = 20_000
	var prog bytes.Buffer
	res, err := RunMemory(MemoryConfig{Files: files, Samples: 5000, Seed: 7, Progress: &prog})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != files || res.Dirs != 20 || res.Mode != "memory" {
		t.Errorf("files %d dirs %d mode %q, want %d, 20, memory", res.Files, res.Dirs, res.Mode, files)
	}
	// The root, the top directory, the directories and the files.
	if want := files + res.Dirs + 2; res.Nodes != want {
		t.Errorf("engine holds %d nodes, want %d", res.Nodes, want)
	}
	if res.RSSAfterBytes <= res.RSSBeforeBytes || res.HeapAfterBytes <= res.HeapBeforeBytes {
		t.Errorf("memory did not grow: resident %d -> %d, heap %d -> %d",
			res.RSSBeforeBytes, res.RSSAfterBytes, res.HeapBeforeBytes, res.HeapAfterBytes)
	}
	if want := (float64(res.RSSAfterBytes) - float64(res.RSSBeforeBytes)) / files; res.RSSBytesPerFile != want {
		t.Errorf("resident bytes per file %v, want %v", res.RSSBytesPerFile, want)
	}
	if want := (float64(res.HeapAfterBytes) - float64(res.HeapBeforeBytes)) / files; res.HeapBytesPerFile != want {
		t.Errorf("heap bytes per file %v, want %v", res.HeapBytesPerFile, want)
	}
	if res.BuildSeconds <= 0 || math.Abs(res.FilesPerSec*res.BuildSeconds-files) > 1e-6*files {
		t.Errorf("build %vs at %v files/s does not make %d files", res.BuildSeconds, res.FilesPerSec, files)
	}
	if !(res.GCPauseP50Us <= res.GCPauseP99Us && res.GCPauseP99Us <= res.GCPauseMaxUs) {
		t.Errorf("GC pauses p50 %v p99 %v max %v out of order", res.GCPauseP50Us, res.GCPauseP99Us, res.GCPauseMaxUs)
	}
	if (res.GCPauses == 0) != (res.GCPauseMaxUs == 0) {
		t.Errorf("%d pauses with max %vµs", res.GCPauses, res.GCPauseMaxUs)
	}
	for name, v := range map[string]int{"getattr": res.GetattrSamples, "lookup": res.LookupSamples} {
		if v < 1 || v > 5000 {
			t.Errorf("%s samples %d, want 1 to 5000", name, v)
		}
	}
	if res.GetattrNs <= 0 || res.LookupNs <= 0 || res.GetattrP99Ns <= 0 || res.LookupP99Ns <= 0 {
		t.Errorf("read times getattr %v (p99 %v) lookup %v (p99 %v)", res.GetattrNs, res.GetattrP99Ns, res.LookupNs, res.LookupP99Ns)
	}
	if !strings.Contains(prog.String(), "built 20000 of 20000 files") {
		t.Errorf("progress lacks the last build line:\n%s", prog.String())
	}

	var out bytes.Buffer
	if err := WriteJSON(&out, res); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"files", "dirs", "rss_bytes_per_file", "heap_bytes_per_file", "build_seconds",
		"gc_pause_p50_us", "gc_pause_p99_us", "gc_pause_max_us", "getattr_ns", "lookup_ns"} {
		if _, ok := m[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, out.String())
		}
	}
	// The idle figures appear exactly when the engine compacts.
	_, compacts := any(engine.New(0, 0)).(idleCompactor)
	if _, ok := m["rss_bytes_per_file_after_idle"]; ok != compacts {
		t.Errorf("rss_bytes_per_file_after_idle present %v, engine compacts %v", ok, compacts)
	}
	out.Reset()
	if err := WriteMemoryTable(&out, res); err != nil || !strings.Contains(out.String(), "resident") {
		t.Errorf("table (%v):\n%s", err, out.String())
	}
}

func TestRunMemoryRefusesBadTrees(t *testing.T) {
	for _, cfg := range []MemoryConfig{{Files: 0}, {Files: 10, Dirs: 20}, {Files: 10, Samples: -1}} {
		if _, err := RunMemory(cfg); err == nil {
			t.Errorf("RunMemory(%+v) accepted", cfg)
		}
	}
}
