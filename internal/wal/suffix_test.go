package wal

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/canopyfs/canopy/internal/vfs"
)

func TestTruncateAfterAcrossSegments(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, Options{SegmentSize: 1024})
		appendRange(t, l, 1, 100, 7)
		if n := len(segmentFiles(t, fsys, dir)); n < 4 {
			t.Fatalf("only %d segments; the test needs several", n)
		}
		if err := l.TruncateAfter(40); err != nil {
			t.Fatalf("TruncateAfter: %v", err)
		}
		if l.LastLSN() != 40 || l.SyncedLSN() != 40 {
			t.Fatalf("LastLSN %d SyncedLSN %d, want 40", l.LastLSN(), l.SyncedLSN())
		}
		checkReplay(t, l, 0, 40)
		// New records take the removed lsns, with other contents.
		if _, err := l.Append([]byte("new 41"), []byte("new 42")); err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		mustClose(t, l)
		l = openLog(t, fsys, dir, Options{SegmentSize: 1024})
		defer mustClose(t, l)
		if l.LastLSN() != 42 {
			t.Fatalf("after reopen LastLSN %d, want 42", l.LastLSN())
		}
		var got []string
		err := l.Replay(40, func(lsn uint64, rec []byte) error {
			got = append(got, string(rec))
			return nil
		})
		if err != nil || len(got) != 2 || got[0] != "new 41" || got[1] != "new 42" {
			t.Fatalf("Replay after 40: %q, %v", got, err)
		}
	})
}

func TestTruncateAfterSegmentBoundaryAndNoop(t *testing.T) {
	fsys := vfs.NewMem()
	l := openLog(t, fsys, "wal", Options{SegmentSize: 512})
	defer mustClose(t, l)
	appendRange(t, l, 1, 60, 1)
	segs := segmentFiles(t, fsys, "wal")
	cut := segs[2].first - 1 // the last record of segment 1
	if err := l.TruncateAfter(cut); err != nil {
		t.Fatal(err)
	}
	if got := len(segmentFiles(t, fsys, "wal")); got != 3 {
		t.Fatalf("%d segments after cutting at a boundary, want 3 (the third empty)", got)
	}
	if err := l.TruncateAfter(cut + 5); err != nil || l.LastLSN() != cut {
		t.Fatalf("TruncateAfter past the end: %v, LastLSN %d", err, l.LastLSN())
	}
	appendRange(t, l, cut+1, cut+3, 1)
	checkReplay(t, l, 0, cut+3)
	if err := l.TruncateBefore(cut); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateAfter(0); !errors.Is(err, ErrTruncated) {
		t.Fatalf("TruncateAfter below the oldest record: %v, want ErrTruncated", err)
	}
}

func TestResetStartsAtLSN(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, Options{SegmentSize: 1024})
		appendRange(t, l, 1, 50, 5)
		if err := l.Reset(1001); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		if l.FirstLSN() != 1001 || l.LastLSN() != 1000 {
			t.Fatalf("after Reset: FirstLSN %d LastLSN %d", l.FirstLSN(), l.LastLSN())
		}
		appendRange(t, l, 1001, 1010, 3)
		mustClose(t, l)
		l = openLog(t, fsys, dir, Options{SegmentSize: 1024})
		defer mustClose(t, l)
		if l.FirstLSN() != 1001 || l.LastLSN() != 1010 {
			t.Fatalf("reopened: FirstLSN %d LastLSN %d", l.FirstLSN(), l.LastLSN())
		}
		checkReplay(t, l, 1000, 1010)
		if err := l.Replay(10, func(uint64, []byte) error { return nil }); !errors.Is(err, ErrTruncated) {
			t.Fatalf("Replay of reset records: %v, want ErrTruncated", err)
		}
	})
}

func TestStateRoundTrip(t *testing.T) {
	fsys := vfs.NewMem()
	if _, ok, err := ReadState(fsys, "wal"); ok || err != nil {
		t.Fatalf("ReadState of nothing: ok=%v err=%v", ok, err)
	}
	want := State{Term: 7, Vote: 3, Commit: 99}
	if err := WriteState(fsys, "wal", want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadState(fsys, "wal")
	if err != nil || !ok || got != want {
		t.Fatalf("ReadState: %+v ok=%v err=%v, want %+v", got, ok, err, want)
	}
	b := readAll(t, fsys, "wal/state")
	b[10] ^= 1
	writeAll(t, fsys, "wal/state", b)
	if _, _, err := ReadState(fsys, "wal"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged state: %v, want ErrCorrupt", err)
	}
	writeAll(t, fsys, "wal/state", b[:20])
	if _, _, err := ReadState(fsys, "wal"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short state: %v, want ErrCorrupt", err)
	}
}

// TestStateCrash writes states in a row and pulls the plug at a random
// file-system operation: what is read back is the last state whose
// WriteState returned, or the one being written, never anything else.
func TestStateCrash(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		mem := vfs.NewMem()
		var crashed *vfs.MemFS
		opsLeft := 1 + rng.IntN(60)
		fsys := vfs.NewFaulty(mem, func(vfs.Op, string) error {
			if crashed != nil {
				return errCrashed
			}
			if opsLeft--; opsLeft == 0 {
				crashed = mem.CrashTorn(rng)
				return errCrashed
			}
			return nil
		})
		var done, pending State
		var ok bool
		for i := uint64(1); crashed == nil; i++ {
			pending = State{Term: i, Vote: i % 3, Commit: 10 * i}
			if err := WriteState(fsys, "wal", pending); err != nil {
				break
			}
			done, ok = pending, true
		}
		got, found, err := ReadState(crashed, "wal")
		if err != nil {
			t.Fatalf("seed %d: ReadState after crash: %v", seed, err)
		}
		switch {
		case found && (got == done || got == pending):
		case !found && !ok:
		default:
			t.Fatalf("seed %d: read %+v (found %v), want %+v or %+v", seed, got, found, done, pending)
		}
	}
}
