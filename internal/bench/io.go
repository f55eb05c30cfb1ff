package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"time"
)

// IOConfig configures the file I/O benchmark (TestDFSIO style).
type IOConfig struct {
	Conns   Conns
	Files   int    // files written and read
	Size    int64  // bytes per file
	Workers int    // files in flight at once
	Buffer  int    // bytes per Write and Read call; default 1 MiB
	Dir     string // where the files go; "" = /bench-io-<random>
	Keep    bool   // leave the files in place

	// FixedFiles is how many empty files measure the fixed cost per file
	// (create, commit, close with no data); 0 = min(Files, 200).
	FixedFiles int
	Progress   io.Writer // phase lines; nil = none
}

// FixedCostWarn is the share of the write time spent on per-file fixed
// costs above which a result measures metadata rather than bytes.
const FixedCostWarn = 0.20

// IOResult is the outcome of the I/O benchmark.
type IOResult struct {
	Mode      string `json:"mode"` // io
	Files     int    `json:"files"`
	SizeBytes int64  `json:"size_bytes"`
	Workers   int    `json:"workers"`
	Conns     int    `json:"conns"`
	Buffer    int    `json:"buffer_bytes"`

	WriteSeconds     float64 `json:"write_seconds"`
	WriteMiBPerSec   float64 `json:"write_mib_per_sec"`
	ReadSeconds      float64 `json:"read_seconds"`
	ReadMiBPerSec    float64 `json:"read_mib_per_sec"`
	FilesPerSec      float64 `json:"files_per_sec"` // files written per second
	ReadFilesPerSec  float64 `json:"read_files_per_sec"`
	FixedCostSeconds float64 `json:"fixed_cost_seconds"` // per file: create, commit, close with no data
	FixedCostShare   float64 `json:"fixed_cost_share"`   // of the write phase's time
	// CeilingMiBPerSec is the best write rate the run could reach if
	// writing a file's bytes cost nothing: workers files at a time, each
	// taking the fixed cost. HarnessShare is the write rate's share of it.
	CeilingMiBPerSec float64  `json:"ceiling_mib_per_sec"`
	HarnessShare     float64  `json:"harness_share"`
	Warnings         []string `json:"warnings"`
}

// RunIO writes cfg.Files files of cfg.Size bytes with cfg.Workers workers,
// reads them back, and measures the fixed cost per file on empty files.
func RunIO(ctx context.Context, cfg IOConfig) (*IOResult, error) {
	switch {
	case len(cfg.Conns) == 0:
		return nil, errors.New("io benchmark: no connections")
	case cfg.Files < 1 || cfg.Workers < 1 || cfg.Size < 0:
		return nil, fmt.Errorf("io benchmark: need files >= 1, workers >= 1, size >= 0")
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 1 << 20
	}
	if cfg.FixedFiles <= 0 {
		cfg.FixedFiles = min(cfg.Files, 200)
	}
	dir := cfg.Dir
	if dir == "" {
		dir = "/bench-io-" + randomHex(4)
	}
	c0 := cfg.Conns[0]
	if err := c0.MkdirAll(ctx, dir, 0o755); err != nil {
		return nil, fmt.Errorf("io benchmark: %w", err)
	}
	if !cfg.Keep {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			c0.RemoveAll(cctx, dir)
		}()
	}
	res := &IOResult{Mode: "io", Files: cfg.Files, SizeBytes: cfg.Size, Workers: cfg.Workers,
		Conns: len(cfg.Conns), Buffer: cfg.Buffer}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	// One buffer of random bytes, written from a different offset per
	// call, so that no layer sees runs of zeros or repeats it could skip.
	pattern := make([]byte, cfg.Buffer+4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range pattern {
		pattern[i] = byte(rng.Uint32())
	}
	name := func(prefix string, i int) string { return fmt.Sprintf("%s/%s%06d", dir, prefix, i) }
	conn := func(w int) int { return w % len(cfg.Conns) }

	// Fixed cost: empty files, same workers.
	progress("io: fixed cost on %d empty files", cfg.FixedFiles)
	t0 := time.Now()
	err := stripe(cfg.FixedFiles, cfg.Workers, func(w, i int) error {
		f, err := cfg.Conns[conn(w)].OpenFile(ctx, name("empty-", i), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("io benchmark: fixed cost: %w", err)
	}
	par := min(cfg.Workers, cfg.FixedFiles)
	res.FixedCostSeconds = time.Since(t0).Seconds() * float64(par) / float64(cfg.FixedFiles)

	progress("io: writing %d files of %s with %d workers", cfg.Files, FormatSize(cfg.Size), cfg.Workers)
	var calls atomic.Int64
	t0 = time.Now()
	err = stripe(cfg.Files, cfg.Workers, func(w, i int) error {
		f, err := cfg.Conns[conn(w)].OpenFile(ctx, name("f-", i), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		for left := cfg.Size; left > 0; {
			n := min(left, int64(cfg.Buffer))
			k := int(calls.Add(1) % 4096)
			if _, err := f.Write(pattern[k : k+int(n)]); err != nil {
				f.Close()
				return err
			}
			left -= n
		}
		return f.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("io benchmark: write: %w", err)
	}
	res.WriteSeconds = time.Since(t0).Seconds()

	progress("io: reading them back")
	t0 = time.Now()
	err = stripe(cfg.Files, cfg.Workers, func(w, i int) error {
		f, err := cfg.Conns[conn(w)].Open(ctx, name("f-", i))
		if err != nil {
			return err
		}
		defer f.Close()
		buf := make([]byte, cfg.Buffer)
		var got int64
		for {
			n, err := f.Read(buf)
			got += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		if got != cfg.Size {
			return fmt.Errorf("%s: read %d bytes, wrote %d", f.Name(), got, cfg.Size)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("io benchmark: read: %w", err)
	}
	res.ReadSeconds = time.Since(t0).Seconds()

	total := float64(cfg.Files) * float64(cfg.Size) / (1 << 20)
	res.WriteMiBPerSec = total / res.WriteSeconds
	res.ReadMiBPerSec = total / res.ReadSeconds
	res.FilesPerSec = float64(cfg.Files) / res.WriteSeconds
	res.ReadFilesPerSec = float64(cfg.Files) / res.ReadSeconds
	res.assess()
	return res, nil
}

// assess derives the fixed cost's share, the ceiling and the warnings from
// the measured times.
func (r *IOResult) assess() {
	workers := float64(min(r.Workers, r.Files))
	fixed := r.FixedCostSeconds * float64(r.Files) / workers
	r.FixedCostShare = min(1, fixed/r.WriteSeconds)
	r.CeilingMiBPerSec, r.HarnessShare = 0, 0
	if r.FixedCostSeconds > 0 {
		r.CeilingMiBPerSec = workers / r.FixedCostSeconds * float64(r.SizeBytes) / (1 << 20)
		r.HarnessShare = r.WriteMiBPerSec / r.CeilingMiBPerSec
	}
	r.Warnings = []string{}
	if r.FixedCostShare > FixedCostWarn {
		r.Warnings = append(r.Warnings, fmt.Sprintf(
			"fixed cost dominates: creating, committing and closing a file costs %.2f ms, %.0f%% of the write time; this measures metadata, not bytes (use fewer, larger files to measure bandwidth)",
			1000*r.FixedCostSeconds, 100*r.FixedCostShare))
	}
	if r.CeilingMiBPerSec > 0 && r.WriteMiBPerSec >= (1-CeilingMargin)*r.CeilingMiBPerSec {
		r.Warnings = append(r.Warnings, fmt.Sprintf(
			"measuring the harness, not the data path: %.1f MiB/s is %.0f%% of the %.1f MiB/s that the per-file fixed cost alone allows",
			r.WriteMiBPerSec, 100*r.HarnessShare, r.CeilingMiBPerSec))
	}
}

// WriteIOTable prints r for people.
func WriteIOTable(w io.Writer, r *IOResult) error {
	_, err := fmt.Fprintf(w, `files        %d x %s, %d workers, %d connections
write        %.1f MiB/s  (%.2f s, %.0f files/s)
read         %.1f MiB/s  (%.2f s, %.0f files/s)
fixed cost   %.3f ms per file (create, commit, close), %.1f%% of the write time
ceiling      %.1f MiB/s if bytes cost nothing; this write rate is %.1f%% of it
`, r.Files, FormatSize(r.SizeBytes), r.Workers, r.Conns,
		r.WriteMiBPerSec, r.WriteSeconds, r.FilesPerSec,
		r.ReadMiBPerSec, r.ReadSeconds, r.ReadFilesPerSec,
		1000*r.FixedCostSeconds, 100*r.FixedCostShare,
		r.CeilingMiBPerSec, 100*r.HarnessShare)
	for _, warn := range r.Warnings {
		if err == nil {
			_, err = fmt.Fprintf(w, "warning: %s\n", warn)
		}
	}
	return err
}
