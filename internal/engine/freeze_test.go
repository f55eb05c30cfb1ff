package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// bulkOps returns n random operations over three directories of fill
// files each (made by bulkFill), so that the node slab spans several
// chunks and freed slots are reused across them: removes and re-creates,
// xattrs, data commits, truncations and renames between the directories.
func bulkOps(seed uint64, n, fill int) []detOp {
	rng := rand.New(rand.NewPCG(seed, 7))
	ops := make([]detOp, n)
	for i := range ops {
		k, d1, d2, f1, f2, v := rng.IntN(8), rng.IntN(3), rng.IntN(3), rng.IntN(fill), rng.IntN(fill), rng.Uint32()
		ops[i] = func(e *Engine, now int64) {
			dir := func(d int) Ino {
				a, err := e.Lookup(Cred{}, e.Root(), fmt.Sprintf("b%d", d))
				if err != nil {
					panic(err)
				}
				return a.Ino
			}
			p, q := dir(d1), dir(d2)
			name := fmt.Sprintf("f%d", f1)
			switch k {
			case 0:
				e.Unlink(Cred{}, p, name, now)
			case 1:
				e.Mknod(Cred{}, p, name, S_IFREG|0o644, 0, now)
			case 2:
				if a, err := e.Lookup(Cred{}, p, name); err == nil {
					e.SetXattr(Cred{}, a.Ino, fmt.Sprintf("user.x%d", v%3), []byte(name), 0, now)
				}
			case 3:
				if a, err := e.Lookup(Cred{}, p, name); err == nil {
					if first, got, err := e.AllocSlices(a.Ino, 3); err == nil && got > 0 {
						s := Slice{ID: first, Size: 4096, Len: 4096, Pos: v % 8192}
						e.Commit(Cred{}, a.Ino, []SliceWrite{{Chunk: v % 2, Slice: s}}, 0, now, now)
					}
				}
			case 4:
				if a, err := e.Lookup(Cred{}, p, name); err == nil {
					e.SetAttr(Cred{}, a.Ino, SetAttr{Valid: SetSize | SetMode, Size: uint64(v % 6000), Mode: v & 0o777}, now)
				}
			case 5:
				e.Rename(Cred{}, p, name, q, fmt.Sprintf("f%d", f2), 0, now)
			case 6:
				if a, err := e.Lookup(Cred{}, p, name); err == nil {
					e.SetAttr(Cred{}, a.Ino, SetAttr{Valid: SetUID | SetGID, UID: v % 5, GID: v % 3}, now)
				}
			case 7:
				// An id of an earlier batch, which may still be pending.
				if a, err := e.Lookup(Cred{}, p, name); err == nil {
					s := Slice{ID: e.NextSliceID() - 1 - uint64(v%6), Size: 512, Len: 512, Pos: v % 4096}
					e.Commit(Cred{}, a.Ino, []SliceWrite{{Chunk: 1, Slice: s}}, 0, now, now)
				}
			}
		}
	}
	return ops
}

// bulkFill makes the directories bulkOps works in.
func bulkFill(t *testing.T, e *Engine, fill int) {
	t.Helper()
	for d := range 3 {
		a, err := e.Mkdir(Cred{}, e.Root(), fmt.Sprintf("b%d", d), 0o755, 2)
		if err != nil {
			t.Fatal(err)
		}
		for i := range fill {
			if _, err := e.Mknod(Cred{}, a.Ino, fmt.Sprintf("f%d", i), S_IFREG|0o644, 0, 3); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// mixOps interleaves the determinism workload with bulkOps.
func mixOps(seed uint64, n, fill int) []detOp {
	a, b := detOps(seed, n), bulkOps(seed, n, fill)
	ops := make([]detOp, 0, 2*n)
	for i := range n {
		ops = append(ops, a[i], b[i])
	}
	return ops
}

// encoded is the result of encoding a frozen view on its own goroutine.
type encoded struct {
	b   []byte
	err error
}

func encodeAsync(f *Frozen) <-chan encoded {
	ch := make(chan encoded, 1)
	go func() {
		var b bytes.Buffer
		err := f.WriteCheckpoint(&b)
		ch <- encoded{b.Bytes(), err}
	}()
	return ch
}

// A checkpoint of a frozen view, encoded on another goroutine while
// random operations and the idle sweep go on changing the engine, holds
// exactly the bytes WriteCheckpoint wrote at the freeze on a twin engine
// that applied the same operations and nothing else; it loads, and writes
// the same bytes again. Freezes follow one another, sometimes overlap,
// and some are released without being encoded. After them the engine and
// its twin still agree.
func TestFreezeWhileOperating(t *testing.T) {
	const fill = 2500 // three directories: the node slab spans two chunks
	for seed := uint64(1); seed <= 6; seed++ {
		live, twin := New(0, 1), New(0, 1)
		bulkFill(t, live, fill)
		bulkFill(t, twin, fill)
		rng := rand.New(rand.NewPCG(seed, 99))
		ops := mixOps(seed, 1500, fill)
		type pending struct {
			f    *Frozen
			want []byte
			done <-chan encoded // nil: released without encoding
			at   int            // the step at which it ends
		}
		var live1 []pending
		freezes := 0
		for i, op := range ops {
			now := int64(1000 + i)
			if rng.IntN(40) == 0 && len(live1) < 3 {
				p := pending{f: live.Freeze(), want: checkpointBytes(t, twin), at: i + 1 + rng.IntN(200)}
				if rng.IntN(4) != 0 {
					p.done = encodeAsync(p.f)
				}
				live1 = append(live1, p)
				freezes++
			}
			op(live, now)
			op(twin, now)
			if rng.IntN(3) == 0 {
				live.CompactIdle(rng.IntN(5000))
			}
			keep := live1[:0]
			for _, p := range live1 {
				if i < p.at && i != len(ops)-1 {
					keep = append(keep, p)
					continue
				}
				if p.done != nil {
					r := <-p.done
					if r.err != nil {
						t.Fatalf("seed %d: frozen checkpoint: %v", seed, r.err)
					}
					if !bytes.Equal(r.b, p.want) {
						t.Fatalf("seed %d step %d: the frozen checkpoint differs from the twin's at the freeze (%d and %d bytes)", seed, i, len(r.b), len(p.want))
					}
					loaded, err := Load(bytes.NewReader(r.b))
					if err != nil {
						t.Fatalf("seed %d: load the frozen checkpoint: %v", seed, err)
					}
					if again := checkpointBytes(t, loaded); !bytes.Equal(again, p.want) {
						t.Fatalf("seed %d: the loaded frozen checkpoint writes other bytes", seed)
					}
				}
				p.f.Release()
			}
			live1 = keep
		}
		if freezes < 5 || live.Freezes() != 0 {
			t.Fatalf("seed %d: %d freezes taken, %d still live", seed, freezes, live.Freezes())
		}
		if err := live.Check(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !bytes.Equal(checkpointBytes(t, live), checkpointBytes(t, twin)) {
			t.Fatalf("seed %d: after the freezes the engine and its twin differ", seed)
		}
	}
}

// A freeze released without encoding leaves the engine writing in place
// again, and its view can no longer be encoded.
func TestFreezeReleasedWithoutEncoding(t *testing.T) {
	e := New(1, 1)
	d, err := e.Mkdir(Root, e.Root(), "d", 0o755, 2)
	if err != nil {
		t.Fatal(err)
	}
	f := e.Freeze()
	chunk := &e.st.nodes.chunks[0][0]
	if _, err := e.SetAttr(Root, d.Ino, SetAttr{Valid: SetMode, Mode: 0o700}, 3); err != nil {
		t.Fatal(err)
	}
	if &e.st.nodes.chunks[0][0] == chunk {
		t.Fatal("a write under a freeze changed the frozen chunk in place")
	}
	f.Release()
	f.Release() // twice: nothing more
	if e.Freezes() != 0 {
		t.Fatalf("%d freezes live after release", e.Freezes())
	}
	chunk = &e.st.nodes.chunks[0][0]
	if _, err := e.SetAttr(Root, d.Ino, SetAttr{Valid: SetMode, Mode: 0o755}, 4); err != nil {
		t.Fatal(err)
	}
	if &e.st.nodes.chunks[0][0] != chunk {
		t.Fatal("a write with no freeze live copied its chunk")
	}
	if err := f.WriteCheckpoint(&bytes.Buffer{}); !errors.Is(err, ErrReleased) {
		t.Fatalf("encoding a released view: %v, want ErrReleased", err)
	}
	if a, err := e.GetAttr(d.Ino); err != nil || a.Mode&0o777 != 0o755 {
		t.Fatalf("after release: %+v %v", a, err)
	}
}

// The idle sweep packs directories, and operations inflate them again,
// while a freeze is live; the frozen view keeps the entries as they were,
// packed or not.
func TestFreezeWithIdleSweep(t *testing.T) {
	e := New(1, 1)
	var dirs []Ino
	for d := range 4 {
		a, err := e.Mkdir(Root, e.Root(), fmt.Sprintf("d%d", d), 0o755, 2)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, a.Ino)
		for i := range 1000 {
			if _, err := e.Mknod(Root, a.Ino, fmt.Sprintf("file.%d", i), S_IFREG|0o644, 0, 3); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Pack d0 and d1 before the freeze.
	for e.CompactIdle(1<<20) > 0 {
	}
	if e.PackedDirs() != 5 {
		t.Fatalf("%d directories packed, want 5", e.PackedDirs())
	}
	want := checkpointBytes(t, e)
	f := e.Freeze()
	done := encodeAsync(f)
	// Inflate d0 by a lookup and d1 by a change; pack d2 and d3 again
	// after changing them.
	if _, err := e.Lookup(Root, dirs[0], "file.7"); err != nil {
		t.Fatal(err)
	}
	if err := e.Unlink(Root, dirs[1], "file.8", 4); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs[2:] {
		if err := e.Rename(Root, d, "file.9", d, "file.renamed", 0, 5); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Mknod(Root, d, "new", S_IFREG|0o644, 0, 5); err != nil {
			t.Fatal(err)
		}
	}
	before := e.PackedDirs()
	for e.CompactIdle(1<<20) > 0 {
	}
	if e.PackedDirs() <= before {
		t.Fatalf("the sweep packed nothing under the freeze (%d packed)", e.PackedDirs())
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !bytes.Equal(r.b, want) {
		t.Fatal("the frozen checkpoint differs from the one written at the freeze")
	}
	f.Release()
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Lookup(Root, dirs[3], "file.renamed"); err != nil {
		t.Fatal(err)
	}
}
