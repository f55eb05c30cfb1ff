package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// loadBoth loads data in parallel and on one goroutine and requires the
// same outcome: the same error, or engines whose checkpoints are the
// same bytes (which hold the slot order and the free list too).
func loadBoth(t *testing.T, data []byte) (*Engine, error) {
	t.Helper()
	par, perr := load(bytes.NewReader(data), true)
	ser, serr := load(bytes.NewReader(data), false)
	if (perr == nil) != (serr == nil) || perr != nil && perr.Error() != serr.Error() {
		t.Fatalf("parallel load: %v; serial load: %v", perr, serr)
	}
	if perr != nil {
		return nil, perr
	}
	if p, s := checkpointBytes(t, par), checkpointBytes(t, ser); !bytes.Equal(p, s) {
		t.Fatalf("parallel and serial loads differ (%d and %d bytes)", len(p), len(s))
	}
	return par, nil
}

// TestParallelLoadMatchesSerial loads checkpoints of random engines, and
// damaged copies of them, both ways: same engine or same error.
func TestParallelLoadMatchesSerial(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		e := New(0, 1)
		for i, op := range detOps(seed, 600) {
			op(e, int64(1000+i))
			if i%97 == 0 {
				e.CompactIdle(1 << 30)
			}
		}
		ck := checkpointBytes(t, e)
		got, err := loadBoth(t, ck)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if again := checkpointBytes(t, got); !bytes.Equal(again, ck) {
			t.Fatalf("seed %d: loaded engine's checkpoint differs", seed)
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		for range 40 {
			bad := bytes.Clone(ck)
			switch rng.IntN(3) {
			case 0:
				bad = bad[:rng.IntN(len(bad))]
			case 1:
				bad[8+rng.IntN(len(bad)-8)] ^= byte(1 + rng.IntN(255))
			default:
				i := 8 + rng.IntN(len(bad)-8)
				bad = append(bad[:i:i], bad[min(len(bad), i+1+rng.IntN(8)):]...)
			}
			loadBoth(t, bad)
		}
	}
}

// TestParallelLoadLargeDirectory loads a directory larger than one batch
// of entries, whole and cut at places inside it.
func TestParallelLoadLargeDirectory(t *testing.T) {
	e := New(0, 1)
	d, err := e.Mkdir(Root, e.Root(), "big", 0o755, 1)
	if err != nil {
		t.Fatal(err)
	}
	const n = loadBatchEntries*2 + 100
	for i := range n {
		if _, err := e.Mknod(Root, d.Ino, fmt.Sprintf("file.%d", i), S_IFREG|0o644, 0, 2); err != nil {
			t.Fatal(err)
		}
	}
	ck := checkpointBytes(t, e)
	got, err := loadBoth(t, ck)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := got.Lookup(Root, d.Ino, fmt.Sprintf("file.%d", n-1)); err != nil || a.Mode&S_IFMT != S_IFREG {
		t.Fatalf("last entry: %+v, %v", a, err)
	}
	for _, cut := range []int{len(ck) / 2, len(ck) * 3 / 4, len(ck) - 10} {
		if _, err := loadBoth(t, ck[:cut]); err == nil {
			t.Fatalf("cut at %d of %d: loaded", cut, len(ck))
		}
	}
	// An entry given twice, in the second batch of the directory.
	name := []byte("file.70000")
	i := bytes.Index(ck, name)
	bad := bytes.Clone(ck)
	copy(bad[i:], "file.10000")
	if _, err := loadBoth(t, bad); err == nil {
		t.Fatal("repeated entry: loaded")
	}
}

// TestLoadTimes times Load of a checkpoint of CANOPY_LOAD_FILES files
// (in directories of 1,000) in parallel and on one goroutine, alternated,
// twice each; it is a measurement, skipped unless the variable is set.
func TestLoadTimes(t *testing.T) {
	files, _ := strconv.Atoi(os.Getenv("CANOPY_LOAD_FILES"))
	if files <= 0 {
		t.Skip("set CANOPY_LOAD_FILES to time loads")
	}
	e := New(0, 1)
	var dir Ino
	for i := range files {
		if i%1000 == 0 {
			a, err := e.Mkdir(Cred{}, e.Root(), fmt.Sprintf("mdtest_tree.%d", i/1000), 0o755, 1)
			if err != nil {
				t.Fatal(err)
			}
			dir = a.Ino
		}
		if _, err := e.Mknod(Cred{}, dir, fmt.Sprintf("file.mdtest.0.%d", i%1000), S_IFREG|0o644, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	ck := checkpointBytes(t, e)
	e = nil
	for round := range 2 {
		for _, parallel := range []bool{false, true} {
			runtime.GC()
			start := time.Now()
			got, err := load(bytes.NewReader(ck), parallel)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("round %d: %d files, %d bytes, parallel %v: %.2f s", round, files, len(ck), parallel, time.Since(start).Seconds())
			runtime.KeepAlive(got)
		}
	}
}
