package client_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/layout"
)

var (
	modelSeed  = flag.Uint64("seed", 0, "seed of the model-based file test (0: from the clock)")
	modelSteps = flag.Int("steps", 800, "steps of the model-based file test, per backend (-short: 300)")
)

// The model-based test applies one random sequence of writes, overwrites,
// truncates (down and up), sparse extensions, reads, syncs and reopens to
// a local file and to a Canopy file, and compares them after every step.
// Offsets fall in two windows: the start of the file and the first chunk
// boundary, so writes that cross chunks are covered without comparing
// 64 MiB on every step (all of the file is compared every 100 steps and
// at the end).
func TestFileModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	steps := *modelSteps
	if testing.Short() {
		steps = min(steps, 300)
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Logf("reproduce with: go test ./client -run 'TestFileModel/%s' -seed %d -steps %d", b.name, seed, steps)
			runModel(t, b, seed, steps)
		})
	}
}

const (
	winLen = 1 << 20
	win2   = layout.ChunkSize - winLen/2 // the second window straddles the chunk boundary
)

// windows are the ranges writes and truncates touch.
var windows = [][2]int64{{0, winLen}, {win2, win2 + winLen}}

type model struct {
	t     *testing.T
	rng   *rand.Rand
	local *os.File
	f     *client.File
	env   *dataEnv
	name  string
	step  int
	op    string
}

func runModel(t *testing.T, b backend, seed uint64, steps int) {
	env := startData(t, b, client.Options{})
	local, err := os.Create(filepath.Join(t.TempDir(), "model"))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	m := &model{t: t, rng: rand.New(rand.NewPCG(seed, 7)), local: local, env: env, name: "/model"}
	m.reopen(os.O_RDWR | os.O_CREATE)
	defer func() { m.f.Close() }()
	for m.step = 0; m.step < steps; m.step++ {
		m.apply()
		m.compareWindows()
		if m.step%100 == 99 {
			m.compareAll()
		}
	}
	m.compareAll()
}

func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("step %d (%s): %s", m.step, m.op, fmt.Sprintf(format, args...))
}

func (m *model) reopen(flag int) {
	if m.f != nil {
		if err := m.f.Close(); err != nil {
			m.fatalf("close: %v", err)
		}
	}
	f, err := m.env.c.OpenFile(m.env.ctx, m.name, flag, 0o644)
	if err != nil {
		m.fatalf("open: %v", err)
	}
	m.f = f
}

// offset picks an offset in a window, leaving room for n bytes.
func (m *model) offset(n int) int64 {
	w := windows[m.rng.IntN(len(windows))]
	return w[0] + m.rng.Int64N(w[1]-w[0]-int64(n)+1)
}

func (m *model) length() int {
	switch m.rng.IntN(10) {
	case 0:
		return 1 + m.rng.IntN(16)
	case 1:
		return 64<<10 + m.rng.IntN(256<<10)
	default:
		return 1 + m.rng.IntN(16<<10)
	}
}

func (m *model) randBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(m.rng.Uint32())
	}
	return b
}

func (m *model) size() int64 {
	fi, err := m.local.Stat()
	if err != nil {
		m.t.Fatal(err)
	}
	return fi.Size()
}

func (m *model) writeAt(p []byte, off int64) {
	if _, err := m.local.WriteAt(p, off); err != nil {
		m.t.Fatal(err)
	}
	if n, err := m.f.WriteAt(p, off); err != nil || n != len(p) {
		m.fatalf("write %d at %d: %d, %v", len(p), off, n, err)
	}
}

func (m *model) truncate(size int64) {
	if err := m.local.Truncate(size); err != nil {
		m.t.Fatal(err)
	}
	if err := m.f.Truncate(size); err != nil {
		m.fatalf("truncate to %d: %v", size, err)
	}
}

func (m *model) apply() {
	switch r := m.rng.IntN(100); {
	case r < 30:
		m.op = "write"
		n := m.length()
		m.writeAt(m.randBytes(n), m.offset(n))
	case r < 45:
		m.op = "burst of writes"
		// Several writes in a row, sequential and scattered, buffered
		// together before the next comparison commits them.
		off := m.offset(64 << 10)
		for k := 0; k < 2+m.rng.IntN(10); k++ {
			n := 1 + m.rng.IntN(8<<10)
			if m.rng.IntN(3) == 0 {
				off = m.offset(n)
			}
			m.writeAt(m.randBytes(n), off)
			off += int64(n)
		}
	case r < 55:
		m.op = "overwrite"
		if size := m.size(); size > 0 {
			off := m.rng.Int64N(size)
			n := int(min(int64(m.length()), size-off))
			m.writeAt(m.randBytes(n), off)
		}
	case r < 62:
		m.op = "truncate down"
		if size := m.size(); size > 0 {
			m.truncate(m.rng.Int64N(size))
		}
	case r < 67:
		m.op = "truncate up"
		m.truncate(m.offset(0))
	case r < 72:
		m.op = "sparse extension"
		// Past the end, leaving a hole.
		n := 1 + m.rng.IntN(4<<10)
		w := windows[len(windows)-1]
		m.writeAt(m.randBytes(n), w[0]+m.rng.Int64N(w[1]-w[0]-int64(n)))
	case r < 90:
		m.op = "read"
		off := m.offset(0)
		n := m.length()
		want := make([]byte, n)
		wn, werr := m.local.ReadAt(want, off)
		got := make([]byte, n)
		gn, gerr := m.f.ReadAt(got, off)
		if gn != wn || errors.Is(gerr, io.EOF) != errors.Is(werr, io.EOF) || (gerr != nil && !errors.Is(gerr, io.EOF)) {
			m.fatalf("read %d at %d: %d, %v; want %d, %v", n, off, gn, gerr, wn, werr)
		}
		if !bytes.Equal(got[:gn], want[:wn]) {
			m.fatalf("read %d at %d: other bytes", n, off)
		}
	case r < 95:
		m.op = "sync"
		if err := m.f.Sync(); err != nil {
			m.fatalf("sync: %v", err)
		}
	default:
		m.op = "reopen"
		m.reopen(os.O_RDWR)
	}
}

// compare checks [from, to) of both files.
func (m *model) compare(from, to int64) {
	m.t.Helper()
	if to <= from {
		return
	}
	want := make([]byte, to-from)
	wn, _ := m.local.ReadAt(want, from)
	got := make([]byte, to-from)
	gn, err := m.f.ReadAt(got, from)
	if err != nil && !errors.Is(err, io.EOF) {
		m.fatalf("read [%d,%d): %v", from, to, err)
	}
	if gn != wn {
		m.fatalf("read [%d,%d): %d bytes, want %d", from, to, gn, wn)
	}
	if i := firstDiff(got[:gn], want[:wn]); i >= 0 {
		m.fatalf("byte %d differs: %#x, want %#x", from+int64(i), got[i], want[i])
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func (m *model) compareSize() int64 {
	m.t.Helper()
	size := m.size()
	fi, err := m.f.Stat()
	if err != nil {
		m.fatalf("stat: %v", err)
	}
	if fi.Size() != size {
		m.fatalf("size %d, want %d", fi.Size(), size)
	}
	return size
}

func (m *model) compareWindows() {
	m.t.Helper()
	size := m.compareSize()
	for _, w := range windows {
		m.compare(w[0], min(w[1], size))
	}
}

func (m *model) compareAll() {
	m.t.Helper()
	m.compare(0, m.compareSize())
}
