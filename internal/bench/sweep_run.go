package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strings"
	"time"
)

// SweepOps are the operations a sweep can drive.
var SweepOps = []string{"stat", "create", "null"}

// SweepRunConfig configures a sweep against a Canopy server.
type SweepRunConfig struct {
	Sweep SweepConfig // Workers is the number of threads
	Conns Conns
	Op    string // one of SweepOps

	Files int    // stat: files per thread, created before the sweep
	Dir   string // where the tree goes; "" = /bench-<random>
	Keep  bool   // leave the tree in place

	// CeilingTime is how long the ceiling is measured before the sweep (the
	// null call for stat and create, a no-op for null); 0 skips it.
	CeilingTime time.Duration
}

// RunSweep finds the highest rate at which the server sustains cfg.Op and
// holds a share of it (see Sweep). stat stats random ones of cfg.Files
// files per thread; create creates new empty files, each phase in fresh
// directories, for as long as the phase lasts; null is the null call.
// Everything the sweep made is removed afterwards unless cfg.Keep.
func RunSweep(ctx context.Context, cfg SweepRunConfig) (res *SweepResult, err error) {
	if len(cfg.Conns) == 0 {
		return nil, errors.New("sweep: no connections")
	}
	if !slices.Contains(SweepOps, cfg.Op) {
		return nil, fmt.Errorf("sweep: unknown op %q: want %s", cfg.Op, strings.Join(SweepOps, ", "))
	}
	if cfg.Op == "stat" && cfg.Files < 1 {
		return nil, fmt.Errorf("sweep: files per thread %d: need at least 1", cfg.Files)
	}
	label := "sweep " + cfg.Op
	cfg.Sweep.Label = label

	var wl, ceilingWl Workload
	ceilingOp := "ping"
	params := map[string]any{}
	switch cfg.Op {
	case "null":
		wl, ceilingWl, ceilingOp = Ping(cfg.Conns, 0), Func(func(context.Context, int) error { return nil }), "noop"
	default:
		prefix, made, err := sweepDir(ctx, cfg.Conns, cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("sweep: %w", err)
		}
		base := path.Join(prefix, cfg.Op)
		root := base // what the sweep made and removes afterwards
		if made {
			root = prefix
		}
		cleanup := func() error {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			return removeTree(cctx, cfg.Conns, root, max(cfg.Sweep.Workers, 16))
		}
		if _, err := cfg.Conns.For(0).Mkdir(ctx, base, dirPerm); err != nil {
			if made {
				err = errors.Join(err, cleanup())
			}
			if errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("sweep: %s exists: remove it or choose another directory", base)
			}
			return nil, fmt.Errorf("sweep: %w", err)
		}
		if !cfg.Keep {
			defer func() {
				if cerr := cleanup(); cerr != nil {
					err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
				}
			}()
		}
		files := cfg.Files
		if cfg.Op == "create" {
			files = math.MaxInt32 // a phase ends by time, never by running out
		}
		mc := &MetaConfig{Run: Config{Workers: cfg.Sweep.Workers, Progress: cfg.Sweep.Progress}, Conns: cfg.Conns, Files: files}
		wl, ceilingWl = newMetaLoad(cfg.Op, base, mc), Ping(cfg.Conns, 0)
		params["dir"] = prefix
		if cfg.Op == "stat" {
			params["files"] = cfg.Files
		}
	}

	var ceiling float64
	if cfg.CeilingTime > 0 {
		run := Config{Workers: cfg.Sweep.Workers, Warmup: cfg.Sweep.Warmup, Progress: cfg.Sweep.Progress, clock: cfg.Sweep.clock}
		r, err := Run(ctx, ceilingConfig(run, cfg.CeilingTime), ceilingWl)
		if err != nil {
			return nil, fmt.Errorf("sweep: measure the %s ceiling: %w", ceilingOp, err)
		}
		ceiling = r.OpsPerSec
	}
	res, err = Sweep(ctx, cfg.Sweep, wl)
	if res != nil {
		res.Op, res.Conns = cfg.Op, len(cfg.Conns)
		if len(params) > 0 {
			res.Params = params
		}
		if cfg.CeilingTime > 0 {
			res.SetCeiling(ceilingOp, ceiling)
		}
	}
	if err != nil {
		return res, fmt.Errorf("sweep %s: %w", cfg.Op, err)
	}
	return res, nil
}

// sweepDir makes sure prefix (or /bench-<random> when it is "") exists
// and reports whether it had to make it.
func sweepDir(ctx context.Context, cs Conns, prefix string) (string, bool, error) {
	if prefix == "" {
		prefix = "/bench-" + randomHex(4)
	}
	if !path.IsAbs(prefix) {
		return "", false, fmt.Errorf("directory %q is not absolute", prefix)
	}
	prefix = path.Clean(prefix)
	c := cs.For(0)
	_, err := c.Lstat(ctx, prefix)
	if err == nil {
		return prefix, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	if err := c.MkdirAll(ctx, prefix, dirPerm); err != nil {
		return "", false, err
	}
	return prefix, true, nil
}
