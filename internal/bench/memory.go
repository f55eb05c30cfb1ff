package bench

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/canopyfs/canopy/internal/engine"
)

// Defaults of the memory benchmark.
const (
	DefaultMemoryFiles   = 1_000_000
	DefaultMemorySamples = 1_000_000
	// DefaultSampleTime bounds each of the getattr and lookup passes.
	DefaultSampleTime = 3 * time.Second
	// IdleBudget is the most entries one idle compaction step may take,
	// as a request-serving loop would hand it between batches.
	IdleBudget = 1000
)

// memoryEpoch is the time of the first create; every later operation is
// one microsecond after the one before, so a run is deterministic.
var memoryEpoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// memoryCred is the identity the tree is built and read as: an ordinary
// user owning the tree, so permission checks run as they would for most
// callers.
var memoryCred = engine.Cred{UID: 1000, GID: 1000}

// idleCompactor is an engine that can compact idle parts of its namespace
// in bounded steps: CompactIdle does at most budget entries' work and
// returns how many it compacted, 0 once nothing is left to do. The
// benchmark drives it only when the engine has it.
type idleCompactor interface {
	CompactIdle(budget int) int
}

// MemoryConfig configures the in-process memory benchmark.
type MemoryConfig struct {
	Files int // files in the tree
	Dirs  int // directories they are spread over; 0 = Files/1000, at least 1

	// Samples is how many random getattrs and lookups are timed after the
	// build (each); 0 = DefaultMemorySamples. SampleTime stops a pass
	// early; 0 = DefaultSampleTime.
	Samples    int
	SampleTime time.Duration

	Seed     uint64    // picks the sampled entries; 0 = random
	Progress io.Writer // progress lines; nil = none

	// Save, if set, is given the engine once the build is measured and
	// before the idle sweep, to keep it (as a partition directory a
	// server restarts from, say). Its time is not counted anywhere.
	Save func(*engine.Engine) error
}

// MemoryResult is the outcome of the memory benchmark.
type MemoryResult struct {
	Mode  string `json:"mode"` // memory
	Files int    `json:"files"`
	Dirs  int    `json:"dirs"`
	Nodes int    `json:"nodes"` // the engine's node count after the build (files, directories, the root)

	RSSBeforeBytes   uint64  `json:"rss_before_bytes"`
	RSSAfterBytes    uint64  `json:"rss_after_bytes"`
	RSSBytesPerFile  float64 `json:"rss_bytes_per_file"` // (after - before) / files
	HeapBeforeBytes  uint64  `json:"heap_before_bytes"`
	HeapAfterBytes   uint64  `json:"heap_after_bytes"`
	HeapBytesPerFile float64 `json:"heap_bytes_per_file"` // (after - before) / files

	BuildSeconds float64 `json:"build_seconds"`
	FilesPerSec  float64 `json:"files_per_sec"`
	GCCycles     uint32  `json:"gc_cycles"` // collections during the build
	GCPauses     uint64  `json:"gc_pauses"` // stop-the-world pauses during the build
	GCPauseP50Us float64 `json:"gc_pause_p50_us"`
	GCPauseP99Us float64 `json:"gc_pause_p99_us"`
	GCPauseMaxUs float64 `json:"gc_pause_max_us"`
	// GCCycleMaxUs is the longest total stop-the-world time of one cycle
	// (its pauses added), exact where the bucketed figures above round up;
	// 0 when more cycles ran than the runtime remembers (256).
	GCCycleMaxUs float64 `json:"gc_cycle_pause_max_us"`

	GetattrSamples int     `json:"getattr_samples"`
	GetattrNs      float64 `json:"getattr_ns"`     // mean, from an untimed loop
	GetattrP99Ns   float64 `json:"getattr_p99_ns"` // from a second pass timing each call
	LookupSamples  int     `json:"lookup_samples"`
	LookupNs       float64 `json:"lookup_ns"`
	LookupP99Ns    float64 `json:"lookup_p99_ns"`

	// Set only when the engine compacts idle directories.
	IdleSteps                *int     `json:"idle_steps,omitempty"`
	IdleEntries              *int     `json:"idle_entries,omitempty"`
	IdleSeconds              *float64 `json:"idle_seconds,omitempty"`
	RSSAfterIdleBytes        *uint64  `json:"rss_after_idle_bytes,omitempty"`
	RSSBytesPerFileAfterIdle *float64 `json:"rss_bytes_per_file_after_idle,omitempty"`
}

// RunMemory builds cfg's tree in a fresh engine in this process, as the
// metadata server's apply loop would (the same engine calls, one caller,
// increasing times), and measures what it costs: resident memory and Go
// heap before and after (each after a full collection), the GC pauses
// during the build, the build's time, then the time of random getattrs
// and lookups on the finished tree. If the engine compacts idle
// directories, it is compacted to the end and measured again.
//
// The figures describe the whole process: run nothing else in it.
func RunMemory(cfg MemoryConfig) (*MemoryResult, error) {
	tree, err := NewTree(cfg.Files, cfg.Dirs)
	if err != nil {
		return nil, fmt.Errorf("memory benchmark: %w", err)
	}
	if cfg.Samples == 0 {
		cfg.Samples = DefaultMemorySamples
	}
	if cfg.SampleTime == 0 {
		cfg.SampleTime = DefaultSampleTime
	}
	if cfg.Samples < 1 || cfg.SampleTime < 0 {
		return nil, errors.New("memory benchmark: samples and sample time must be positive")
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	res := &MemoryResult{Mode: "memory", Files: tree.Files, Dirs: tree.Dirs}

	before, err := settle()
	if err != nil {
		return nil, fmt.Errorf("memory benchmark: %w", err)
	}
	pauses0 := pauseSnapshot()
	start := time.Now()
	e, dirs, err := buildTree(tree, cfg.Progress)
	if err != nil {
		return nil, fmt.Errorf("memory benchmark: build: %w", err)
	}
	res.BuildSeconds = time.Since(start).Seconds()
	pauses1 := pauseSnapshot()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.GCCycles = ms.NumGC - before.numGC
	res.GCCycleMaxUs = cycleMaxPause(&ms, before.numGC)
	after, err := settle()
	if err != nil {
		return nil, fmt.Errorf("memory benchmark: %w", err)
	}
	p := pausesBetween(pauses0, pauses1)
	res.GCPauses, res.GCPauseP50Us, res.GCPauseP99Us, res.GCPauseMaxUs = p.Count, p.P50Us, p.P99Us, p.MaxUs
	res.FilesPerSec = float64(tree.Files) / res.BuildSeconds
	res.Nodes = e.Len()
	res.RSSBeforeBytes, res.RSSAfterBytes = before.rss, after.rss
	res.HeapBeforeBytes, res.HeapAfterBytes = before.heapInuse, after.heapInuse
	res.RSSBytesPerFile = perFile(before.rss, after.rss, tree.Files)
	res.HeapBytesPerFile = perFile(before.heapInuse, after.heapInuse, tree.Files)

	if cfg.Save != nil {
		progress(cfg.Progress, "saving the namespace")
		if err := cfg.Save(e); err != nil {
			return nil, fmt.Errorf("memory benchmark: save: %w", err)
		}
	}

	if c, ok := any(e).(idleCompactor); ok {
		progress(cfg.Progress, "compacting idle directories")
		start := time.Now()
		steps, entries := compactIdle(c, IdleBudget)
		secs := time.Since(start).Seconds()
		idle, err := settle()
		if err != nil {
			return nil, fmt.Errorf("memory benchmark: %w", err)
		}
		perIdle := perFile(before.rss, idle.rss, tree.Files)
		res.IdleSteps, res.IdleEntries, res.IdleSeconds = &steps, &entries, &secs
		res.RSSAfterIdleBytes, res.RSSBytesPerFileAfterIdle = &idle.rss, &perIdle
	}

	progress(cfg.Progress, "timing getattr and lookup")
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if err := timeReads(e, tree, dirs, cfg, rng, res); err != nil {
		return nil, fmt.Errorf("memory benchmark: %w", err)
	}
	// The engine must outlive the measurements taken of it.
	runtime.KeepAlive(e)
	return res, nil
}

// cycleMaxPause is the longest stop-the-world time of the collections
// after cycle since, in microseconds, or 0 if the runtime no longer holds
// all of them.
func cycleMaxPause(ms *runtime.MemStats, since uint32) float64 {
	n := ms.NumGC - since
	if n > uint32(len(ms.PauseNs)) {
		return 0
	}
	var longest uint64
	for c := since + 1; c <= ms.NumGC; c++ {
		longest = max(longest, ms.PauseNs[(c+255)%256])
	}
	return float64(longest) / 1e3
}

// perFile is (after - before) / files, negative if memory shrank.
func perFile(before, after uint64, files int) float64 {
	return (float64(after) - float64(before)) / float64(files)
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// buildTree creates tree in a new engine and returns it with the inode
// numbers of the tree's directories.
func buildTree(tree Tree, prog io.Writer) (*engine.Engine, []engine.Ino, error) {
	now := memoryEpoch
	tick := func() int64 { now += int64(time.Microsecond); return now }
	e := engine.New(0, now)
	top, err := e.Mkdir(engine.Root, e.Root(), TreeTop, dirPerm, tick())
	if err != nil {
		return nil, nil, fmt.Errorf("mkdir %s: %w", TreeTop, err)
	}
	own := engine.SetAttr{Valid: engine.SetUID | engine.SetGID, UID: memoryCred.UID, GID: memoryCred.GID}
	if _, err := e.SetAttr(engine.Root, top.Ino, own, tick()); err != nil {
		return nil, nil, fmt.Errorf("chown %s: %w", TreeTop, err)
	}
	dirs := make([]engine.Ino, tree.Dirs)
	step, done := max(tree.Files/10, 1), 0
	for k := range tree.Dirs {
		d, err := e.Mkdir(memoryCred, top.Ino, tree.DirName(k), dirPerm, tick())
		if err != nil {
			return nil, nil, fmt.Errorf("mkdir %s: %w", tree.DirName(k), err)
		}
		dirs[k] = d.Ino
		for i := range tree.FilesIn(k) {
			if _, err := e.Mknod(memoryCred, d.Ino, FileName(i), engine.S_IFREG|filePerm, 0, tick()); err != nil {
				return nil, nil, fmt.Errorf("mknod %s/%s: %w", tree.DirName(k), FileName(i), err)
			}
			if done++; done%step == 0 {
				progress(prog, "built %d of %d files", done, tree.Files)
			}
		}
	}
	return e, dirs, nil
}

// compactIdle calls c's compaction step with budget until it reports
// nothing left, returning the steps taken and the entries compacted.
func compactIdle(c idleCompactor, budget int) (steps, entries int) {
	for {
		n := c.CompactIdle(budget)
		if n <= 0 {
			return steps, entries
		}
		steps++
		entries += n
	}
}
