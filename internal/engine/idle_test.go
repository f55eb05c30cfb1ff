package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"
)

// deepTree builds dirs directories of files plain files each, directories
// created between the files as a tree builder does, and returns the
// engine with the directories' and files' inode numbers.
func deepTree(t *testing.T, dirs, files int) (*Engine, []Ino, [][]Ino) {
	t.Helper()
	now := int64(1_000_000)
	tick := func() int64 { now += 1000; return now }
	e := New(7, tick())
	ds := make([]Ino, dirs)
	fs := make([][]Ino, dirs)
	for k := range dirs {
		d, err := e.Mkdir(Root, e.Root(), fmt.Sprintf("dir.%d", k), 0o755, tick())
		if err != nil {
			t.Fatal(err)
		}
		ds[k] = d.Ino
		for i := range files {
			a, err := e.Mknod(Root, d.Ino, fmt.Sprintf("file.mdtest.%d.%d", k, i), S_IFREG|0o644, 0, tick())
			if err != nil {
				t.Fatal(err)
			}
			fs[k] = append(fs[k], a.Ino)
		}
	}
	return e, ds, fs
}

func sweep(e *Engine) {
	for e.CompactIdle(1000) > 0 {
	}
}

func checkpointOf(t *testing.T, e *Engine) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := e.WriteCheckpoint(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDeepPack packs directories of plain files with their nodes, releases
// the node chunks left with ghosts only, and requires that nothing shows:
// the same checkpoint bytes, attributes read by inode and by name, the
// invariants; then that reaching a child by inode inflates its directory.
func TestDeepPack(t *testing.T) {
	e, ds, fs := deepTree(t, 6, 700)
	twin, _, _ := deepTree(t, 6, 700)
	before := checkpointOf(t, e)
	want := map[Ino]Attr{}
	for _, f := range fs {
		for _, ino := range f {
			a, err := e.GetAttr(ino)
			if err != nil {
				t.Fatal(err)
			}
			want[ino] = a
		}
	}
	sweep(e)
	if e.DeepPackedDirs() != len(ds) {
		t.Fatalf("%d directories packed with their nodes, want %d", e.DeepPackedDirs(), len(ds))
	}
	if e.ReleasedChunks() == 0 {
		t.Fatal("no node chunk released")
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if got := checkpointOf(t, e); !bytes.Equal(got, before) {
		t.Fatal("the checkpoint changed with packing")
	}
	if e.DeepPackedDirs() != len(ds) {
		t.Fatal("the checkpoint or Check inflated a directory")
	}
	// A freeze taken while packed encodes the same bytes, whatever the
	// engine inflates after it.
	f := e.Freeze()
	// By inode: the directory of the child inflates, the others stay.
	a, err := e.GetAttr(fs[2][10])
	if err != nil || a != want[fs[2][10]] {
		t.Fatalf("getattr of a packed child: %+v %v, want %+v", a, err, want[fs[2][10]])
	}
	if e.DeepPackedDirs() != len(ds)-1 {
		t.Fatalf("%d directories packed after one child's getattr, want %d", e.DeepPackedDirs(), len(ds)-1)
	}
	if err := e.Unlink(Root, ds[3], "file.mdtest.3.5", 5_000_000); err != nil {
		t.Fatal(err)
	}
	var fb bytes.Buffer
	if err := f.WriteCheckpoint(&fb); err != nil {
		t.Fatal(err)
	}
	f.Release()
	if !bytes.Equal(fb.Bytes(), before) {
		t.Fatal("the freeze's checkpoint is not the state at the freeze")
	}
	if err := twin.Unlink(Root, ds[3], "file.mdtest.3.5", 5_000_000); err != nil {
		t.Fatal(err)
	}
	// A new node takes the freed slot, as on the twin.
	if _, err := e.Mknod(Root, ds[4], "new", S_IFREG|0o600, 0, 5_000_001); err != nil {
		t.Fatal(err)
	}
	if _, err := twin.Mknod(Root, ds[4], "new", S_IFREG|0o600, 0, 5_000_001); err != nil {
		t.Fatal(err)
	}
	for k, f := range fs {
		for i, ino := range f {
			if k == 3 && i == 5 {
				if _, err := e.GetAttr(ino); err != syscall.ENOENT {
					t.Fatalf("getattr of an unlinked file: %v", err)
				}
				continue
			}
			if a, err := e.GetAttr(ino); err != nil || a != want[ino] {
				t.Fatalf("getattr %d: %+v %v, want %+v", ino, a, err, want[ino])
			}
		}
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(checkpointOf(t, e), checkpointOf(t, twin)) {
		t.Fatal("checkpoints differ from the twin's after inflating")
	}
	if e.ReleasedChunks() != 0 || e.DeepPackedDirs() != 0 {
		t.Fatalf("%d chunks released, %d directories packed with nodes after every child was read", e.ReleasedChunks(), e.DeepPackedDirs())
	}
}

// TestDeepPackSkips keeps the nodes of a directory in their slots when a
// child is open, hard-linked, has an xattr or is a directory: the entries
// are packed alone.
func TestDeepPackSkips(t *testing.T) {
	e, ds, fs := deepTree(t, 5, 50)
	if _, err := e.Open(Root, fs[0][3], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Link(Root, fs[1][3], ds[1], "again", 2_000_000); err != nil {
		t.Fatal(err)
	}
	if err := e.SetXattr(Root, fs[2][3], "user.a", []byte("v"), 0, 2_000_001); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Mkdir(Root, ds[3], "sub", 0o755, 2_000_002); err != nil {
		t.Fatal(err)
	}
	sweep(e)
	// ds[4] and the root's (whose children are directories: packed alone).
	if e.DeepPackedDirs() != 1 {
		t.Fatalf("%d directories packed with their nodes, want 1", e.DeepPackedDirs())
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(fs[0][3], 3_000_000); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Lookup(Root, ds[0], "file.mdtest.0.1"); err != nil {
		t.Fatal(err)
	}
	sweep(e)
	if e.DeepPackedDirs() != 2 {
		t.Fatalf("%d directories packed with their nodes once the file is closed, want 2", e.DeepPackedDirs())
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

// packTwin applies the same operations to a plain engine and to one the
// idle sweep packs at random moments (with budgets that stop it anywhere),
// and requires the same results, the same checkpoint bytes, and, for a
// freeze taken on the packed one, the plain one's checkpoint at the freeze.
type packTwin struct {
	t            *testing.T
	plain, packd *Engine
	dirs         []Ino
	files        []Ino // inode numbers handed out to non-directories
	now          int64
	frozen       *Frozen
	frozenWant   []byte
}

func newPackTwin(t *testing.T, dirs, files int) *packTwin {
	p, ds, fs := deepTree(t, dirs, files)
	q, _, _ := deepTree(t, dirs, files)
	tw := &packTwin{t: t, plain: p, packd: q, dirs: ds, now: 10_000_000}
	for _, f := range fs {
		tw.files = append(tw.files, f...)
	}
	return tw
}

// step applies operation op (its arguments taken from a, b, c) to both.
func (tw *packTwin) step(op, a, b, c uint32) {
	t := tw.t
	tw.now += 1000
	d := tw.dirs[int(a)%len(tw.dirs)]
	d2 := tw.dirs[int(b)%len(tw.dirs)]
	f := tw.files[int(b)%len(tw.files)]
	name := fmt.Sprintf("file.mdtest.%d.%d", a%len32(tw.dirs), b%700)
	name2 := fmt.Sprintf("n.%d", c%50)
	var r [2]string
	for i, e := range []*Engine{tw.plain, tw.packd} {
		var res any
		var err error
		switch op % 12 {
		case 0, 1:
			res, err = e.GetAttr(f)
		case 2:
			res, err = e.Lookup(Root, d, name)
		case 3:
			err = e.Unlink(Root, d, name, tw.now)
		case 4:
			res, err = e.Link(Root, f, d2, name2, tw.now)
		case 5:
			err = e.Rename(Root, d, name, d2, name2, 0, tw.now)
		case 6:
			var at Attr
			at, err = e.Mknod(Root, d, name2, S_IFREG|0o640, 0, tw.now)
			res = at
			if err == nil && i == 0 {
				tw.files = append(tw.files, at.Ino)
			}
		case 7:
			res, err = e.SetAttr(Root, f, SetAttr{Valid: SetMode, Mode: 0o600 | c&0o77}, tw.now)
		case 8:
			err = e.SetXattr(Root, f, "user.x", []byte{byte(c)}, 0, tw.now)
		case 9:
			if _, err = e.Open(Root, f, 0); err == nil {
				err = e.Close(f, tw.now)
			}
		case 10:
			res, err = e.Mkdir(Root, d, name2, 0o755, tw.now)
		case 11:
			var ents []Dirent
			var next string
			ents, next, _, err = e.Readdir(Root, d, "", int(c%20)+1, c&1 == 0)
			res = fmt.Sprint(ents, next)
		}
		r[i] = fmt.Sprintf("%+v %v", res, err)
	}
	if r[0] != r[1] {
		t.Fatalf("op %d (%d %d %d): plain %s, packed %s", op%12, a, b, c, r[0], r[1])
	}
	switch c % 7 {
	case 0:
		tw.packd.CompactIdle(int(a % 3000))
	case 1:
		sweep(tw.packd)
	}
	if op%97 == 0 {
		tw.compare()
	}
	if op%53 == 0 {
		tw.freezeOrRelease()
	}
}

func len32[T any](s []T) uint32 { return uint32(len(s)) }

// compare checks the packed engine and compares the two checkpoints.
func (tw *packTwin) compare() {
	tw.t.Helper()
	if err := tw.packd.Check(); err != nil {
		tw.t.Fatalf("packed: %v", err)
	}
	if !bytes.Equal(checkpointOf(tw.t, tw.plain), checkpointOf(tw.t, tw.packd)) {
		tw.t.Fatal("checkpoints differ")
	}
}

// freezeOrRelease freezes the packed engine, or encodes and releases the
// live freeze and compares it with the plain checkpoint at its freeze.
func (tw *packTwin) freezeOrRelease() {
	tw.t.Helper()
	if tw.frozen == nil {
		tw.frozen, tw.frozenWant = tw.packd.Freeze(), checkpointOf(tw.t, tw.plain)
		return
	}
	var b bytes.Buffer
	if err := tw.frozen.WriteCheckpoint(&b); err != nil {
		tw.t.Fatal(err)
	}
	tw.frozen.Release()
	tw.frozen = nil
	if !bytes.Equal(b.Bytes(), tw.frozenWant) {
		tw.t.Fatal("the freeze's checkpoint is not the state at the freeze")
	}
}

func (tw *packTwin) finish() {
	if tw.frozen != nil {
		tw.freezeOrRelease()
	}
	sweep(tw.packd)
	tw.compare()
}

// TestDeepPackRandom runs random operations on directories of a few
// hundred files (so that node chunks are released and come back) with the
// idle sweep after random steps, against an engine never packed.
func TestDeepPackRandom(t *testing.T) {
	steps := 6000
	if testing.Short() {
		steps = 2000
	}
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			tw := newPackTwin(t, 4, 300)
			sweep(tw.packd)
			if tw.packd.ReleasedChunks() == 0 {
				t.Fatal("no chunk released to start with")
			}
			for range steps {
				tw.step(rng.Uint32(), rng.Uint32()%8, rng.Uint32()%400, rng.Uint32())
			}
			tw.finish()
		})
	}
}

// FuzzDeepPack is TestDeepPackRandom with the operations taken from the
// input, four bytes an operation.
func FuzzDeepPack(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 3, 0, 5, 7, 4, 1, 9, 14, 6, 2, 2, 0, 5, 1, 3, 8})
	f.Add([]byte{1, 2, 3, 7, 2, 2, 2, 1, 8, 1, 1, 0, 0, 0, 0, 1, 4, 3, 3, 14})
	f.Fuzz(func(t *testing.T, ops []byte) {
		tw := newPackTwin(t, 3, 150)
		sweep(tw.packd)
		for i := 0; i+4 <= len(ops) && i < 4*500; i += 4 {
			tw.step(uint32(ops[i]), uint32(ops[i+1]), uint32(ops[i+2])*2+uint32(ops[i+1]&1), uint32(ops[i+3]))
		}
		tw.finish()
	})
}

// BenchmarkFirstAccessDeepPacked measures the first access to an idle
// directory of 1,000 plain files packed with their nodes, its node chunks
// released: a lookup by name, or a getattr of a child by inode; either
// inflates the directory and its nodes. Each iteration packs one of 100
// such directories again and times the access alone; p99_us is the 99th
// percentile.
func BenchmarkFirstAccessDeepPacked(b *testing.B) {
	for _, by := range []string{"lookup", "getattr"} {
		b.Run(by, func(b *testing.B) {
			const dirs, perDir = 100, 1000
			e := New(1, 1)
			inos := make([]Ino, dirs)
			kids := make([][]Ino, dirs)
			for k := range dirs {
				a, err := e.Mkdir(Root, e.Root(), fmt.Sprintf("mdtest_tree.%d", k), 0o755, 2)
				if err != nil {
					b.Fatal(err)
				}
				inos[k] = a.Ino
				for i := range perDir {
					c, err := e.Mknod(Root, a.Ino, fmt.Sprintf("file.mdtest.0.%d", i), S_IFREG|0o644, 0, int64(3+i))
					if err != nil {
						b.Fatal(err)
					}
					kids[k] = append(kids[k], c.Ino)
				}
			}
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				k := i % dirs
				b.StopTimer()
				n := e.node(inos[k])
				d := e.st.extraOf(n).dir
				e.st.packDeep(d, n.aux)
				e.st.idle.packedDirs++
				if i < dirs && e.ReleasedChunks() == 0 && k > 2 {
					b.Fatal("no chunk released")
				}
				name := fmt.Sprintf("file.mdtest.0.%d", i%perDir)
				b.StartTimer()
				start := time.Now()
				var err error
				if by == "lookup" {
					_, err = e.Lookup(Root, inos[k], name)
				} else {
					_, err = e.GetAttr(kids[k][i%perDir])
				}
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50_us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99_us")
		})
	}
}
