package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"strconv"
)

// Permission bits of what the metadata workloads create.
const (
	filePerm = 0o644
	dirPerm  = 0o755
)

// metaLoad is one metadata workload (one --op) under base, laid out like
// mdtest: thread w works in base/tNNN, or with shared every thread works
// in base/shared and prefixes its names with tNNN.
//
//   - create, mkdir: each phase in a fresh subdirectory rP; a thread makes
//     at most files items per phase.
//   - rename, unlink: each phase pre-creates files items per thread in a
//     fresh rP, then renames (fN to gN) or removes each once.
//   - stat, readdir, mixed: files items per thread are created once; stat
//     picks a random one (any thread's when shared), readdir lists the
//     whole directory, mixed stats with probability readRatio and creates
//     a new file otherwise.
type metaLoad struct {
	op        string
	cs        Conns
	base      string
	threads   int
	files     int
	shared    bool
	readRatio float64
	page      uint32
	attrs     bool
	progress  io.Writer

	phase int
	ready bool       // the thread directories (stat, readdir, mixed: and the file set) exist
	pool  [][]string // stat, mixed: worker w picks from pool[w]
	want  int        // readdir: entries a listing must return
	dirs  []string   // per worker: where this phase's items go
	seq   []int      // per worker: items made this phase
	rng   []*rand.Rand
}

func newMetaLoad(op, base string, cfg *MetaConfig) *metaLoad {
	m := &metaLoad{
		op: op, cs: cfg.Conns, base: base, threads: cfg.Run.Workers, files: cfg.Files,
		shared: cfg.Shared, readRatio: cfg.ReadRatio, page: uint32(cfg.Page), attrs: cfg.Attrs,
		progress: cfg.Run.Progress,
		dirs:     make([]string, cfg.Run.Workers),
		seq:      make([]int, cfg.Run.Workers),
		rng:      make([]*rand.Rand, cfg.Run.Workers),
	}
	for w := range m.rng {
		m.rng[w] = rand.New(rand.NewPCG(uint64(w)+1, rand.Uint64()))
	}
	return m
}

// home is the directory thread w works in.
func (m *metaLoad) home(w int) string {
	if m.shared {
		return path.Join(m.base, "shared")
	}
	return path.Join(m.base, fmt.Sprintf("t%03d", w))
}

// name is thread w's name for item i of kind (f, d, g, nP.).
func (m *metaLoad) name(w int, kind string, i int) string {
	n := kind + strconv.Itoa(i)
	if m.shared {
		return fmt.Sprintf("t%03d.%s", w, n)
	}
	return n
}

// mkdirs creates dir(w) for every thread (once when shared).
func (m *metaLoad) mkdirs(ctx context.Context, dir func(w int) string) error {
	n := m.threads
	if m.shared {
		n = 1
	}
	return parallel(n, func(w int) error {
		_, err := m.cs.For(w).Mkdir(ctx, dir(w), dirPerm)
		return err
	})
}

// populate creates m.files files named f0... in dir(w) for every thread.
func (m *metaLoad) populate(ctx context.Context, dir func(w int) string) error {
	if m.progress != nil {
		fmt.Fprintf(m.progress, "%s: creating %d files\n", m.op, m.threads*m.files)
	}
	return parallel(m.threads, func(w int) error {
		c, d := m.cs.For(w), dir(w)
		for i := range m.files {
			if _, err := c.Create(ctx, path.Join(d, m.name(w, "f", i)), filePerm); err != nil {
				return err
			}
		}
		return nil
	})
}

// Prepare lays out what the phase needs.
func (m *metaLoad) Prepare(ctx context.Context, phase int) error {
	m.phase = phase
	clear(m.seq)
	switch m.op {
	case "create", "mkdir", "rename", "unlink":
		round := func(w int) string { return path.Join(m.home(w), "r"+strconv.Itoa(phase)) }
		for w := range m.dirs {
			m.dirs[w] = round(w)
		}
		if !m.ready {
			if err := m.mkdirs(ctx, m.home); err != nil {
				return err
			}
			m.ready = true
		}
		if err := m.mkdirs(ctx, round); err != nil {
			return err
		}
		if m.op == "rename" || m.op == "unlink" {
			return m.populate(ctx, round)
		}
		return nil
	}
	// stat, readdir, mixed: one file set for every phase.
	for w := range m.dirs {
		m.dirs[w] = m.home(w)
	}
	if m.ready {
		return nil
	}
	if err := m.mkdirs(ctx, m.home); err != nil {
		return err
	}
	if err := m.populate(ctx, m.home); err != nil {
		return err
	}
	m.ready = true
	m.want = m.files
	if m.shared {
		m.want = m.files * m.threads
	}
	m.pool = make([][]string, m.threads)
	for w := range m.pool {
		for i := range m.files {
			m.pool[w] = append(m.pool[w], path.Join(m.home(w), m.name(w, "f", i)))
		}
	}
	if m.shared { // any thread's file
		var all []string
		for _, p := range m.pool {
			all = append(all, p...)
		}
		for w := range m.pool {
			m.pool[w] = all
		}
	}
	return nil
}

// Do performs one operation of thread w.
func (m *metaLoad) Do(ctx context.Context, w int) error {
	c := m.cs.For(w)
	switch m.op {
	case "create", "mkdir", "rename", "unlink":
		i := m.seq[w]
		if i >= m.files {
			return ErrExhausted
		}
		m.seq[w]++
		switch m.op {
		case "create":
			_, err := c.Create(ctx, path.Join(m.dirs[w], m.name(w, "f", i)), filePerm)
			return err
		case "mkdir":
			_, err := c.Mkdir(ctx, path.Join(m.dirs[w], m.name(w, "d", i)), dirPerm)
			return err
		case "rename":
			return c.Rename(ctx, path.Join(m.dirs[w], m.name(w, "f", i)), path.Join(m.dirs[w], m.name(w, "g", i)))
		default:
			return c.Unlink(ctx, path.Join(m.dirs[w], m.name(w, "f", i)))
		}
	case "stat":
		return m.stat(ctx, w)
	case "readdir":
		n, err := listDir(ctx, c, m.dirs[w], m.page, m.attrs, nil)
		if err == nil && n != m.want {
			err = fmt.Errorf("readdir %s: %d entries, want %d", m.dirs[w], n, m.want)
		}
		return err
	case "mixed":
		if m.rng[w].Float64() < m.readRatio {
			return m.stat(ctx, w)
		}
		i := m.seq[w]
		m.seq[w]++
		_, err := c.Create(ctx, path.Join(m.dirs[w], m.name(w, "n"+strconv.Itoa(m.phase)+".", i)), filePerm)
		return err
	}
	return fmt.Errorf("unknown metadata op %q", m.op)
}

func (m *metaLoad) stat(ctx context.Context, w int) error {
	pool := m.pool[w]
	_, err := m.cs.For(w).Stat(ctx, pool[m.rng[w].IntN(len(pool))])
	return err
}
