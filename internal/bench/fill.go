package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/canopyfs/canopy/client"
)

// DefaultFillWorkers is how many creates the fill keeps in flight.
const DefaultFillWorkers = 64

// FillConfig configures the fill: the memory benchmark's tree built on a
// running server over RPC.
type FillConfig struct {
	Conns   Conns
	Files   int
	Dirs    int    // 0 = Files/1000, at least 1
	Dir     string // the directory TreeTop is made in; "" = the root
	Workers int    // creates in flight; 0 = DefaultFillWorkers

	Progress io.Writer // progress lines; nil = none
}

// FillResult is the outcome of a fill.
type FillResult struct {
	Mode        string  `json:"mode"` // fill
	Files       int     `json:"files"`
	Dirs        int     `json:"dirs"`
	Top         string  `json:"top"` // path of the tree's top directory
	Workers     int     `json:"workers"`
	Conns       int     `json:"conns"`
	Seconds     float64 `json:"seconds"`
	FilesPerSec float64 `json:"files_per_sec"`
}

// RunFill creates cfg's tree (see Tree) under cfg.Dir on the server, with
// the same names as RunMemory builds in process: the directories first,
// then the files by cfg.Workers callers taking the next file in turn, each
// a MKNOD by parent inode as a client's create is. The tree's top must not
// exist yet; nothing is removed afterwards.
func RunFill(ctx context.Context, cfg FillConfig) (*FillResult, error) {
	tree, err := NewTree(cfg.Files, cfg.Dirs)
	if err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	if len(cfg.Conns) == 0 {
		return nil, errors.New("fill: no connections")
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultFillWorkers
	}
	if cfg.Workers < 1 {
		return nil, fmt.Errorf("fill: workers %d: need at least 1", cfg.Workers)
	}
	dir := cfg.Dir
	if dir == "" {
		dir = "/"
	}
	if !path.IsAbs(dir) {
		return nil, fmt.Errorf("fill: directory %q is not absolute", dir)
	}
	top := path.Join(dir, TreeTop)
	res := &FillResult{Mode: "fill", Files: tree.Files, Dirs: tree.Dirs, Top: top, Workers: cfg.Workers, Conns: len(cfg.Conns)}
	start := time.Now()
	fi, err := cfg.Conns.For(0).Mkdir(ctx, top, dirPerm)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("fill: %s exists: remove it or choose another directory", top)
	} else if err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	dirs := make([]client.Ino, tree.Dirs)
	err = stripe(tree.Dirs, cfg.Workers, func(w, k int) error {
		d, err := cfg.Conns.For(w).MkdirAt(ctx, fi.Ino(), tree.DirName(k), dirPerm)
		if err != nil {
			return fmt.Errorf("mkdir %s/%s: %w", top, tree.DirName(k), err)
		}
		dirs[k] = d.Ino()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	var next, done atomic.Int64
	step := int64(max(tree.Files/10, 1))
	err = parallel(min(cfg.Workers, tree.Files), func(w int) error {
		c := cfg.Conns.For(w)
		for {
			j := int(next.Add(1) - 1)
			if j >= tree.Files {
				return nil
			}
			k, i := tree.locate(j)
			if _, err := c.MknodAt(ctx, dirs[k], FileName(i), fillMode, 0); err != nil {
				next.Store(int64(tree.Files)) // the other workers stop too
				return fmt.Errorf("mknod %s/%s/%s: %w", top, tree.DirName(k), FileName(i), err)
			}
			if n := done.Add(1); n%step == 0 {
				progress(cfg.Progress, "created %d of %d files", n, tree.Files)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	res.Seconds = time.Since(start).Seconds()
	res.FilesPerSec = float64(tree.Files) / res.Seconds
	return res, nil
}

// fillMode is the mode of the files the fill creates: regular, 0644.
const fillMode = syscall.S_IFREG | filePerm

// WriteFillTable prints a fill's result for a reader.
func WriteFillTable(w io.Writer, r *FillResult) error {
	_, err := fmt.Fprintf(w, "fill: %d files in %d directories under %s in %.2fs (%.0f files/s, %d workers over %d conn(s))\n",
		r.Files, r.Dirs, r.Top, r.Seconds, r.FilesPerSec, r.Workers, r.Conns)
	return err
}
