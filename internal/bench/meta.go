package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// MetaOps are the metadata workloads, in the order "all" runs them.
var MetaOps = []string{"create", "mkdir", "stat", "readdir", "rename", "unlink", "mixed"}

// Defaults of the metadata benchmark.
const (
	DefaultFiles     = 1000
	DefaultReadRatio = 0.9
	DefaultPage      = 1000
)

// cleanupTimeout bounds the removal of a workload's tree once the run was
// interrupted.
const cleanupTimeout = 5 * time.Minute

// MetaConfig configures the metadata benchmark.
type MetaConfig struct {
	Run   Config // Workers is the number of threads
	Conns Conns
	Op    string // one of MetaOps, or "all" for every one in turn

	Files     int     // items per thread: see metaLoad
	Dir       string  // where the workloads' trees go; "" = /bench-<random>
	Shared    bool    // every thread in one directory
	ReadRatio float64 // mixed: the share of stats
	Page      int     // readdir: entries per page; 0 = the server's default
	Attrs     bool    // readdir: ask for attributes too
	Keep      bool    // leave the trees in place

	// CeilingTime is how long the null-call ceiling is measured before the
	// workloads; 0 skips it.
	CeilingTime time.Duration
}

func (cfg *MetaConfig) check() ([]string, error) {
	switch {
	case len(cfg.Conns) == 0:
		return nil, errors.New("no connections")
	case cfg.Files < 1:
		return nil, fmt.Errorf("files per thread %d: need at least 1", cfg.Files)
	case cfg.ReadRatio < 0 || cfg.ReadRatio > 1:
		return nil, fmt.Errorf("read ratio %v is not between 0 and 1", cfg.ReadRatio)
	case cfg.Page < 0 || cfg.Page > 1<<20:
		return nil, fmt.Errorf("page size %d out of range", cfg.Page)
	}
	if cfg.Op == "all" {
		return MetaOps, nil
	}
	if !slices.Contains(MetaOps, cfg.Op) {
		return nil, fmt.Errorf("unknown op %q: want %s or all", cfg.Op, strings.Join(MetaOps, ", "))
	}
	return []string{cfg.Op}, nil
}

// RunMeta measures the null-call ceiling, then runs each workload cfg.Op
// names under its own directory, removing it afterwards unless cfg.Keep.
// It returns the results of the workloads that completed.
func RunMeta(ctx context.Context, cfg MetaConfig) (results []*Result, err error) {
	ops, err := cfg.check()
	if err != nil {
		return nil, fmt.Errorf("meta benchmark: %w", err)
	}
	prefix := cfg.Dir
	if prefix == "" {
		prefix = "/bench-" + randomHex(4)
	}
	if !path.IsAbs(prefix) {
		return nil, fmt.Errorf("meta benchmark: directory %q is not absolute", prefix)
	}
	prefix = path.Clean(prefix)
	c := cfg.Conns.For(0)
	_, err = c.Lstat(ctx, prefix)
	made := errors.Is(err, fs.ErrNotExist)
	if err != nil && !made {
		return nil, fmt.Errorf("meta benchmark: %w", err)
	}
	if made {
		if err := c.MkdirAll(ctx, prefix, dirPerm); err != nil {
			return nil, fmt.Errorf("meta benchmark: %w", err)
		}
	}
	par := max(cfg.Run.Workers, 16)
	// cleanup removes a tree of the run, even once ctx is done.
	cleanup := func(p string) error {
		if cfg.Keep {
			return nil
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		return removeTree(cctx, cfg.Conns, p, par)
	}
	if made {
		defer func() {
			if cerr := cleanup(prefix); cerr != nil {
				err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
			}
		}()
	}

	var ceiling float64
	if cfg.CeilingTime > 0 {
		r, err := Run(ctx, ceilingConfig(cfg.Run, cfg.CeilingTime), Ping(cfg.Conns, 0))
		if err != nil {
			return nil, fmt.Errorf("measure the null-call ceiling: %w", err)
		}
		ceiling = r.OpsPerSec
	}
	for _, op := range ops {
		base := path.Join(prefix, op)
		if _, err := c.Mkdir(ctx, base, dirPerm); errors.Is(err, fs.ErrExist) {
			return results, fmt.Errorf("meta benchmark %s: %s exists: remove it or choose another directory", op, base)
		} else if err != nil {
			return results, fmt.Errorf("meta benchmark %s: %w", op, err)
		}
		res, err := runMetaOp(ctx, &cfg, op, base, prefix)
		if cerr := cleanup(base); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
		}
		if err != nil {
			return results, fmt.Errorf("meta benchmark %s: %w", op, err)
		}
		if cfg.CeilingTime > 0 {
			res.SetCeiling("ping", ceiling)
		}
		results = append(results, res)
	}
	return results, nil
}

// runMetaOp runs workload op under base, an empty directory.
func runMetaOp(ctx context.Context, cfg *MetaConfig, op, base, prefix string) (*Result, error) {
	run := cfg.Run
	run.Label = op
	res, err := Run(ctx, run, newMetaLoad(op, base, cfg))
	if err != nil {
		return nil, err
	}
	res.Mode, res.Op, res.Conns = "meta", op, len(cfg.Conns)
	res.Params = map[string]any{"files": cfg.Files, "shared": cfg.Shared, "dir": prefix}
	switch op {
	case "mixed":
		res.Params["read_ratio"] = cfg.ReadRatio
	case "readdir":
		entries := cfg.Files
		if cfg.Shared {
			entries *= cfg.Run.Workers
		}
		res.Params["entries"] = entries
		res.Params["page"] = cfg.Page
		res.Params["attrs"] = cfg.Attrs
	}
	return res, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b) // never fails
	return hex.EncodeToString(b)
}
