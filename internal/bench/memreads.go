package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/canopyfs/canopy/internal/engine"
)

// memoryKey is one sampled file: its directory and name.
type memoryKey struct {
	dir  engine.Ino
	name string
}

// randomFile picks a file of tree uniformly: its directory index and its
// index within the directory.
func (t Tree) randomFile(rng *rand.Rand) (k, i int) { return t.locate(rng.IntN(t.Files)) }

// locate maps j (0 <= j < Files) to a file: its directory index and its
// index within the directory; every file has exactly one j.
func (t Tree) locate(j int) (k, i int) {
	q, r := t.Files/t.Dirs, t.Files%t.Dirs
	big := r * (q + 1)
	if j < big {
		return j / (q + 1), j % (q + 1)
	}
	j -= big
	return r + j/q, j % q
}

// timeReads times cfg.Samples getattrs and lookups of random files of the
// built tree (each pass also bounded by cfg.SampleTime) and fills in the
// result's read figures. The means come from loops that read no clock
// per call; the p99s from a second pass timing each call, so they include
// the clock's own cost.
func timeReads(e *engine.Engine, tree Tree, dirs []engine.Ino, cfg MemoryConfig, rng *rand.Rand, res *MemoryResult) error {
	keys := make([]memoryKey, cfg.Samples)
	inos := make([]engine.Ino, cfg.Samples)
	for s := range keys {
		k, i := tree.randomFile(rng)
		keys[s] = memoryKey{dir: dirs[k], name: FileName(i)}
		a, err := e.Lookup(memoryCred, keys[s].dir, keys[s].name)
		if err != nil {
			return fmt.Errorf("lookup %s/%s: %w", tree.DirName(k), keys[s].name, err)
		}
		inos[s] = a.Ino
	}
	var sink uint64
	getattr := func(s int) error {
		a, err := e.GetAttr(inos[s])
		sink += uint64(a.Ino)
		return err
	}
	lookup := func(s int) error {
		a, err := e.Lookup(memoryCred, keys[s].dir, keys[s].name)
		sink += uint64(a.Ino)
		return err
	}
	var err error
	if res.GetattrSamples, res.GetattrNs, res.GetattrP99Ns, err = timeOp(cfg.Samples, cfg.SampleTime, getattr); err != nil {
		return fmt.Errorf("getattr: %w", err)
	}
	if res.LookupSamples, res.LookupNs, res.LookupP99Ns, err = timeOp(cfg.Samples, cfg.SampleTime, lookup); err != nil {
		return fmt.Errorf("lookup: %w", err)
	}
	if sink == 0 {
		return fmt.Errorf("every sampled entry had inode 0")
	}
	return nil
}

// clockEvery is how many calls the mean's loop makes between reads of the
// clock that check its time bound.
const clockEvery = 1024

// timeOp calls op(0), op(1), ... up to n times or for at most limit, and
// returns how many calls it made, their mean time (ns), and the 99th
// percentile of a second pass over the same calls, each timed alone.
func timeOp(n int, limit time.Duration, op func(s int) error) (calls int, meanNs, p99Ns float64, err error) {
	start := time.Now()
	for calls < n {
		if err := op(calls); err != nil {
			return 0, 0, 0, err
		}
		calls++
		if calls%clockEvery == 0 && time.Since(start) > limit {
			break
		}
	}
	meanNs = float64(time.Since(start).Nanoseconds()) / float64(calls)
	h := newHistogram()
	for s := range calls {
		t := time.Now()
		err := op(s)
		record(h, time.Since(t))
		if err != nil {
			return 0, 0, 0, err
		}
	}
	return calls, meanNs, float64(h.ValueAtQuantile(99)), nil
}
