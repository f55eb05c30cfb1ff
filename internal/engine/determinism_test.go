package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// detOp is one step of the determinism workload, applied alike to every
// engine under test.
type detOp func(e *Engine, now int64)

// detOps returns n random operations over a small tree: creates, removes,
// renames, links, several xattrs per node (so their map order would show),
// data commits and slice allocations, so that node slots are freed and
// reused.
func detOps(seed uint64, n int) []detOp {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	name := func() string { return fmt.Sprintf("n%d", rng.IntN(12)) }
	dir := func(e *Engine) Ino {
		// A directory: the root or one of its subdirectories by name.
		if rng.IntN(3) == 0 {
			return e.Root()
		}
		a, err := e.Lookup(Cred{}, e.Root(), fmt.Sprintf("d%d", rng.IntN(4)))
		if err != nil || a.Mode&S_IFMT != S_IFDIR {
			return e.Root()
		}
		return a.Ino
	}
	// Every choice is drawn before the op runs, so that each engine sees
	// the same op whatever its state.
	ops := make([]detOp, n)
	for i := range ops {
		k, nm, nm2, d1, d2 := rng.IntN(9), name(), name(), rng.Uint64(), rng.Uint64()
		pick := func(e *Engine, seed uint64) Ino {
			r := rand.New(rand.NewPCG(seed, 1))
			saved := rng
			rng = r
			defer func() { rng = saved }()
			return dir(e)
		}
		ops[i] = func(e *Engine, now int64) {
			p, q := pick(e, d1), pick(e, d2)
			switch k {
			case 0:
				e.Mkdir(Cred{}, e.Root(), "d"+nm[1:], 0o755, now)
			case 1, 2:
				e.Mknod(Cred{}, p, nm, S_IFREG|0o644, 0, now)
			case 3:
				e.Unlink(Cred{}, p, nm, now)
			case 4:
				e.Rename(Cred{}, p, nm, q, nm2, 0, now)
			case 5:
				if a, err := e.Lookup(Cred{}, p, nm); err == nil {
					e.Link(Cred{}, a.Ino, q, nm2+"l", now)
				}
			case 6:
				if a, err := e.Lookup(Cred{}, p, nm); err == nil {
					for j := range 4 {
						e.SetXattr(Cred{}, a.Ino, fmt.Sprintf("user.k%d", (int(d1)+j)%7), []byte(nm2), 0, now)
					}
				}
			case 7:
				if a, err := e.Lookup(Cred{}, p, nm); err == nil && a.Mode&S_IFMT == S_IFREG {
					if first, got, err := e.AllocSlices(a.Ino, 2); err == nil && got > 0 {
						s := Slice{ID: first, Size: 4096, Len: 4096, Pos: uint32(d2 % 8192)}
						e.Commit(Cred{}, a.Ino, []SliceWrite{{Chunk: 0, Slice: s}}, uint64(s.Pos)+4096, now, now)
					}
				}
			case 8:
				e.Rmdir(Cred{}, e.Root(), "d"+nm[1:], now)
			}
		}
	}
	return ops
}

func checkpointBytes(t *testing.T, e *Engine) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := e.WriteCheckpoint(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Two replicas that applied the same operations write byte-identical
// checkpoints, whatever else happened to them: one restarted from a
// checkpoint midway, one had its directories packed by the idle sweep
// after every step, one neither.
func TestCheckpointsAreDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		ops := detOps(seed, 600)
		plain := New(0, 1)
		packed := New(0, 1)
		restarted := New(0, 1)
		for i, op := range ops {
			now := int64(1000 + i)
			op(plain, now)
			op(packed, now)
			packed.CompactIdle(1 << 30)
			op(restarted, now)
			if i == len(ops)/2 || i == 3*len(ops)/4 {
				var err error
				if restarted, err = Load(bytes.NewReader(checkpointBytes(t, restarted))); err != nil {
					t.Fatalf("seed %d: load at step %d: %v", seed, i, err)
				}
			}
		}
		want := checkpointBytes(t, plain)
		for name, e := range map[string]*Engine{"packed": packed, "restarted": restarted} {
			if err := e.Check(); err != nil {
				t.Fatalf("seed %d: %s: %v", seed, name, err)
			}
			if got := checkpointBytes(t, e); !bytes.Equal(got, want) {
				t.Fatalf("seed %d: the %s engine's checkpoint differs from the plain one's (%d and %d bytes)", seed, name, len(got), len(want))
			}
		}
		// The same engine twice in a row, and once more after a load.
		if again := checkpointBytes(t, plain); !bytes.Equal(again, want) {
			t.Fatalf("seed %d: two checkpoints of one engine differ", seed)
		}
	}
}
