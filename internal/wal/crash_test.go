package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/canopyfs/canopy/internal/vfs"
)

// TestCrashRecovery drives a Log through random appends, syncs,
// truncations, replays and restarts on a MemFS, and pulls the plug at a
// random file-system operation: between two operations, or in the middle
// of Sync, a segment roll or TruncateBefore. The crash keeps only what was
// durable, sometimes with a torn prefix of unsynced appends. Each restart
// checks that:
//
//   - every record up to the last successful Sync (and up to the log's own
//     SyncedLSN) is present and intact;
//   - no record appears that was not appended, and none differs from what
//     was appended at its lsn;
//   - lsns are gapless from the checkpoint on, and Open never reports
//     corruption.
//
// Every iteration is reproducible from its seed.
func TestCrashRecovery(t *testing.T) {
	iterations := 3000
	if testing.Short() {
		iterations = 300
	}
	var stats crashStats
	for i := range iterations {
		sim := &crashSim{
			t:     t,
			seed:  uint64(i),
			rng:   rand.New(rand.NewPCG(uint64(i), 0xc0ffee)),
			mem:   vfs.NewMem(),
			model: [][]byte{nil},
			stats: &stats,
		}
		sim.run(1 + sim.rng.IntN(4))
	}
	t.Logf("%+v", stats)
	// Guard against a simulation that never reaches the interesting cases.
	if stats.unsyncedKept == 0 || stats.unsyncedLost == 0 || stats.midOpCrashes == 0 || stats.truncations == 0 ||
		stats.suffixCuts == 0 || stats.resets == 0 || stats.syncedCut == 0 {
		t.Fatalf("the simulation missed cases it should cover: %+v", stats)
	}
}

var errCrashed = errors.New("machine crashed")

type crashStats struct {
	recoveries   int // successful Opens checked
	unsyncedKept int // recoveries that found records beyond the last sync
	unsyncedLost int // recoveries that lost records appended but not synced
	midOpCrashes int // crashes inside a log operation
	truncations  int // successful TruncateBefore calls
	suffixCuts   int // successful TruncateAfter calls
	syncedCut    int // of them, those that removed synced records
	resets       int // successful Reset calls, including redone ones
}

// crashSim is one run of TestCrashRecovery. It is used by one goroutine;
// inject runs inside that goroutine's calls into the Log.
type crashSim struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	mem   *vfs.MemFS
	stats *crashStats

	model [][]byte // model[lsn] is the record last appended at lsn
	acked uint64   // records up to here were reported durable
	ckpt  uint64   // lsn of the newest checkpoint: replay starts after it

	// resetTo, when not zero, is the lsn a Reset was asked to continue
	// from that has not returned yet. The caller of Reset has made a
	// snapshot durable first, so after a crash it does the Reset again.
	resetTo uint64

	opsLeft int        // file-system operations before the crash
	crashed *vfs.MemFS // what survived the crash, once it has happened
}

func (s *crashSim) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed %d: %s", s.seed, fmt.Sprintf(format, args...))
}

// inject is the FaultyFS hook: it counts operations down to the crash, and
// fails every operation from the crash on.
func (s *crashSim) inject(op vfs.Op, name string) error {
	if s.crashed != nil {
		return errCrashed
	}
	s.opsLeft--
	if s.opsLeft == 0 {
		s.crash()
		return errCrashed
	}
	return nil
}

func (s *crashSim) crash() {
	if s.rng.IntN(2) == 0 {
		s.crashed = s.mem.Crash()
	} else {
		s.crashed = s.mem.CrashTorn(s.rng)
	}
}

func (s *crashSim) options() Options {
	prealloc := int64(-1) // a segment that grows with every sync
	if s.rng.IntN(4) != 0 {
		prealloc = 1 + s.rng.Int64N(4096) // zeros ahead, written again often
	}
	return Options{
		SegmentSize: 64 + s.rng.Int64N(2048),
		Preallocate: prealloc,
		Logger:      quiet,
		bufferSize:  16 + s.rng.IntN(1024), // bufio's minimum is 16
	}
}

func (s *crashSim) run(cycles int) {
	for range cycles {
		s.crashed = nil
		s.opsLeft = 1 + s.rng.IntN(150)
		s.cycle(vfs.NewFaulty(s.mem, s.inject))
		if s.crashed == nil {
			s.crash() // between two operations
		}
		s.mem = s.crashed
	}
	// The last recovery, with nothing failing.
	l, err := Open(s.mem, "wal", s.options())
	if err != nil {
		s.fatalf("final Open: %v", err)
	}
	s.check(l)
	if err := l.Close(); err != nil {
		s.fatalf("final Close: %v", err)
	}
}

// cycle opens the log, checks it, and runs random operations until the
// crash.
func (s *crashSim) cycle(fsys vfs.FS) {
	l, err := Open(fsys, "wal", s.options())
	if err != nil {
		if s.crashed == nil {
			s.fatalf("Open: %v", err)
		}
		return
	}
	if !s.check(l) {
		return
	}
	for i := 0; i < 300 && s.crashed == nil; i++ {
		var ok bool
		switch r := s.rng.IntN(100); {
		case r < 50:
			ok = s.appendBatch(l)
		case r < 76:
			ok = s.sync(l)
		case r < 84:
			ok = s.truncate(l)
		case r < 88:
			ok = s.truncateAfter(l)
		case r < 90:
			ok = s.reset(l, 0)
		case r < 95:
			ok = s.replay(l)
		default:
			l, ok = s.restart(fsys, l)
		}
		if l != nil && ok {
			// The log's own claim counts as much as a successful Sync:
			// a segment roll syncs too. (Not after a failed TruncateAfter,
			// which has not yet lowered its claim.)
			s.acked = max(s.acked, l.SyncedLSN())
		}
		if !ok {
			if s.crashed == nil {
				s.fatalf("operation failed without a crash")
			}
			s.stats.midOpCrashes++
			return
		}
	}
}

// check verifies a freshly opened log against the model, and makes the
// model match it. It returns false if the machine crashed during the check.
func (s *crashSim) check(l *Log) bool {
	if s.resetTo != 0 && !s.reset(l, s.resetTo) {
		return false
	}
	last := l.LastLSN()
	appended := uint64(len(s.model) - 1)
	switch {
	case last < s.acked:
		s.fatalf("log ends at lsn %d, but lsn %d was synced", last, s.acked)
	case last > appended:
		s.fatalf("log ends at lsn %d, but only %d records were appended", last, appended)
	case l.SyncedLSN() != last:
		s.fatalf("after Open: SyncedLSN %d, LastLSN %d", l.SyncedLSN(), last)
	}
	next := s.ckpt + 1
	err := l.Replay(s.ckpt, func(lsn uint64, rec []byte) error {
		if lsn != next {
			s.fatalf("Replay gave lsn %d, want %d", lsn, next)
		}
		if !bytes.Equal(rec, s.model[lsn]) {
			s.fatalf("record %d differs from what was appended", lsn)
		}
		next++
		return nil
	})
	if err != nil {
		if s.crashed == nil {
			s.fatalf("Replay(%d): %v", s.ckpt, err)
		}
		return false
	}
	if next-1 != last {
		s.fatalf("Replay(%d) ended at lsn %d, want %d", s.ckpt, next-1, last)
	}
	s.stats.recoveries++
	if last > s.acked {
		s.stats.unsyncedKept++
	}
	if last < appended {
		s.stats.unsyncedLost++
	}
	s.model = s.model[:last+1]
	s.acked = last
	return true
}

func (s *crashSim) appendBatch(l *Log) bool {
	first := l.LastLSN() + 1
	if first != uint64(len(s.model)) {
		s.fatalf("LastLSN %d, but the model holds %d records", first-1, len(s.model)-1)
	}
	recs := make([][]byte, 1+s.rng.IntN(8))
	for i := range recs {
		size := s.rng.IntN(64)
		if s.rng.IntN(4) == 0 {
			size = s.rng.IntN(4096)
		}
		recs[i] = make([]byte, size)
		for j := range recs[i] {
			recs[i][j] = byte(s.rng.Uint32())
		}
	}
	// Into the model first: whatever of the batch reaches the disk before a
	// crash must match it.
	s.model = append(s.model, recs...)
	last, err := l.Append(recs...)
	if err != nil {
		return false
	}
	if want := first + uint64(len(recs)) - 1; last != want {
		s.fatalf("Append returned lsn %d, want %d", last, want)
	}
	return true
}

func (s *crashSim) sync(l *Log) bool {
	if err := l.Sync(); err != nil {
		return false
	}
	if l.SyncedLSN() != l.LastLSN() {
		s.fatalf("after Sync: SyncedLSN %d, LastLSN %d", l.SyncedLSN(), l.LastLSN())
	}
	s.acked = l.LastLSN()
	return true
}

func (s *crashSim) truncate(l *Log) bool {
	if s.acked <= s.ckpt {
		return true
	}
	// A checkpoint at some synced lsn is durable; the log may lose what it
	// covers.
	s.ckpt += 1 + s.rng.Uint64N(s.acked-s.ckpt)
	if err := l.TruncateBefore(s.ckpt); err != nil {
		return false
	}
	s.stats.truncations++
	return true
}

func (s *crashSim) replay(l *Log) bool {
	last := l.LastLSN()
	next := s.ckpt + 1
	err := l.Replay(s.ckpt, func(lsn uint64, rec []byte) error {
		if lsn != next || !bytes.Equal(rec, s.model[lsn]) {
			s.fatalf("Replay gave lsn %d (want %d) or a wrong record", lsn, next)
		}
		next++
		return nil
	})
	if err != nil {
		return false
	}
	if next-1 != last {
		s.fatalf("Replay ended at %d, want %d", next-1, last)
	}
	return true
}

// restart closes the log cleanly and opens it again.
func (s *crashSim) restart(fsys vfs.FS, l *Log) (*Log, bool) {
	if err := l.Close(); err != nil {
		return nil, false
	}
	s.acked = l.LastLSN() // Close syncs
	l, err := Open(fsys, "wal", s.options())
	if err != nil {
		return nil, false
	}
	if l.LastLSN() != s.acked {
		s.fatalf("reopened after Close: LastLSN %d, want %d", l.LastLSN(), s.acked)
	}
	return l, s.check(l)
}

// truncateAfter removes a random suffix of the log, synced or not, at or
// after the checkpoint. Until it returns the model keeps the old records:
// a crash part-way may leave them.
func (s *crashSim) truncateAfter(l *Log) bool {
	last := l.LastLSN()
	if last < s.ckpt {
		s.fatalf("LastLSN %d below the checkpoint %d", last, s.ckpt)
	}
	n := s.ckpt + s.rng.Uint64N(last-s.ckpt+1)
	// The records after n may be lost from now on, durable or not.
	cutSynced := s.acked > n
	s.acked = min(s.acked, n)
	if err := l.TruncateAfter(n); err != nil {
		return false
	}
	if l.LastLSN() != n || l.SyncedLSN() > n {
		s.fatalf("after TruncateAfter(%d): LastLSN %d, SyncedLSN %d", n, l.LastLSN(), l.SyncedLSN())
	}
	// From here on the removed records must never come back: the model
	// no longer has them, so check fails if they do.
	s.model = s.model[:n+1]
	s.stats.suffixCuts++
	if cutSynced {
		s.stats.syncedCut++
	}
	return true
}

// reset replaces the log by an empty one continuing from next, as when a
// snapshot taken at next-1 has been installed; next=0 picks one at random.
func (s *crashSim) reset(l *Log, next uint64) bool {
	if next == 0 {
		next = s.ckpt + 1 + s.rng.Uint64N(l.LastLSN()-s.ckpt+20)
	}
	s.resetTo = next
	if err := l.Reset(next); err != nil {
		return false
	}
	if l.FirstLSN() != next || l.LastLSN() != next-1 || l.SyncedLSN() != next-1 {
		s.fatalf("after Reset(%d): FirstLSN %d, LastLSN %d, SyncedLSN %d", next, l.FirstLSN(), l.LastLSN(), l.SyncedLSN())
	}
	s.resetTo = 0
	s.model = s.model[:min(uint64(len(s.model)), next)]
	for uint64(len(s.model)) < next {
		s.model = append(s.model, nil)
	}
	s.ckpt = next - 1
	s.acked = next - 1
	s.stats.resets++
	return true
}
