package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/internal/vfs"
)

var quiet = slog.New(slog.DiscardHandler)

// payload returns the test record for lsn: its lsn, then a length and
// filling that vary with it.
func payload(lsn uint64) []byte {
	b := make([]byte, 8+int(lsn*7919%300))
	binary.LittleEndian.PutUint64(b, lsn)
	for i := 8; i < len(b); i++ {
		b[i] = byte(lsn) + byte(i)
	}
	return b
}

func openLog(t testing.TB, fsys vfs.FS, dir string, opts Options) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	l, err := Open(fsys, dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// appendRange appends payload(lsn) for lsn in [from, to], in batches of
// batch, syncing after each batch.
func appendRange(t *testing.T, l *Log, from, to uint64, batch int) {
	t.Helper()
	var recs [][]byte
	for lsn := from; lsn <= to; lsn++ {
		recs = append(recs, payload(lsn))
		if len(recs) == batch || lsn == to {
			last, err := l.Append(recs...)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if last != lsn {
				t.Fatalf("Append returned lsn %d, want %d", last, lsn)
			}
			if err := l.Sync(); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			recs = recs[:0]
		}
	}
}

// checkReplay replays the log after lsn after and checks that it yields
// exactly payload(lsn) for every lsn in (after, last].
func checkReplay(t *testing.T, l *Log, after, last uint64) {
	t.Helper()
	next := after + 1
	err := l.Replay(after, func(lsn uint64, rec []byte) error {
		if lsn != next {
			t.Fatalf("Replay gave lsn %d, want %d", lsn, next)
		}
		if !bytes.Equal(rec, payload(lsn)) {
			t.Fatalf("Replay gave wrong payload for lsn %d", lsn)
		}
		next++
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%d): %v", after, err)
	}
	if next-1 != last {
		t.Fatalf("Replay(%d) ended at lsn %d, want %d", after, next-1, last)
	}
}

func segmentFiles(t *testing.T, fsys vfs.FS, dir string) []segment {
	t.Helper()
	segs, err := listSegments(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

func readAll(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeAll(t *testing.T, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustClose(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// eachFS runs fn against the operating system's file system and a MemFS.
func eachFS(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Run("disk", func(t *testing.T) { fn(t, vfs.Default, filepath.Join(t.TempDir(), "wal")) })
	t.Run("mem", func(t *testing.T) { fn(t, vfs.NewMem(), "wal") })
}

func TestEmptyLog(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, Options{})
		if l.LastLSN() != 0 || l.SyncedLSN() != 0 {
			t.Fatalf("new log: LastLSN %d, SyncedLSN %d; want 0, 0", l.LastLSN(), l.SyncedLSN())
		}
		checkReplay(t, l, 0, 0)
		if last, err := l.Append(); err != nil || last != 0 {
			t.Fatalf("Append() = %d, %v; want 0, nil", last, err)
		}
		mustClose(t, l)
		l = openLog(t, fsys, dir, Options{})
		defer mustClose(t, l)
		if last, err := l.Append([]byte("first")); err != nil || last != 1 {
			t.Fatalf("first Append = %d, %v; want 1, nil", last, err)
		}
	})
}

func TestRoundTripAcrossSegments(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		l := openLog(t, fsys, dir, Options{SegmentSize: 4 << 10})
		appendRange(t, l, 1, 500, 7)
		if l.LastLSN() != 500 || l.SyncedLSN() != 500 {
			t.Fatalf("LastLSN %d, SyncedLSN %d; want 500, 500", l.LastLSN(), l.SyncedLSN())
		}
		checkReplay(t, l, 0, 500)
		checkReplay(t, l, 123, 500)
		checkReplay(t, l, 499, 500)
		checkReplay(t, l, 500, 500)
		mustClose(t, l)

		segs := segmentFiles(t, fsys, dir)
		if len(segs) < 10 {
			t.Fatalf("%d segments for 500 records in 4 KiB segments; want many", len(segs))
		}
		for i, seg := range segs {
			if i == 0 && seg.first != 1 {
				t.Fatalf("first segment starts at lsn %d", seg.first)
			}
			size, err := fsys.Size(filepath.Join(dir, seg.name))
			if err != nil {
				t.Fatal(err)
			}
			// A segment passes SegmentSize by less than one record; the
			// last one also holds the zeros written ahead of its records.
			if i < len(segs)-1 && size >= 4<<10+recordHeaderSize+300+8 {
				t.Errorf("segment %s holds %d bytes", seg.name, size)
			}
		}

		l = openLog(t, fsys, dir, Options{SegmentSize: 4 << 10})
		defer mustClose(t, l)
		checkReplay(t, l, 0, 500)
	})
}

func TestReopenContinuesLSNs(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		for round := range uint64(5) {
			l := openLog(t, fsys, dir, Options{SegmentSize: 2 << 10})
			if want := round * 40; l.LastLSN() != want || l.SyncedLSN() != want {
				t.Fatalf("reopen %d: LastLSN %d, SyncedLSN %d; want %d", round, l.LastLSN(), l.SyncedLSN(), want)
			}
			appendRange(t, l, round*40+1, round*40+40, 3)
			mustClose(t, l)
		}
		l := openLog(t, fsys, dir, Options{SegmentSize: 2 << 10})
		defer mustClose(t, l)
		checkReplay(t, l, 0, 200)
	})
}

func TestReplaySeesUnsyncedRecords(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "wal", Options{})
	defer mustClose(t, l)
	if _, err := l.Append(payload(1), payload(2), payload(3)); err != nil {
		t.Fatal(err)
	}
	if l.SyncedLSN() != 0 {
		t.Fatalf("SyncedLSN %d before any Sync", l.SyncedLSN())
	}
	checkReplay(t, l, 0, 3)
	if l.SyncedLSN() != 0 {
		t.Fatalf("Replay synced the log: SyncedLSN %d", l.SyncedLSN())
	}
}

func TestReplayStopsOnCallbackError(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "wal", Options{})
	defer mustClose(t, l)
	appendRange(t, l, 1, 10, 10)
	stop := errors.New("stop")
	var seen int
	err := l.Replay(0, func(lsn uint64, rec []byte) error {
		seen++
		if lsn == 4 {
			return stop
		}
		return nil
	})
	if err != stop || seen != 4 {
		t.Fatalf("Replay = %v after %d records; want the callback's error after 4", err, seen)
	}
}

// cutLog writes 20 records into one segment, lets damage change the
// segment's bytes, and reopens it: it checks that exactly the first
// wantLast records survive, that the cut was logged, and that the log then
// takes appends that survive another reopen.
func cutLog(t *testing.T, wantLast uint64, damage func(seg []byte) []byte) {
	t.Helper()
	mem := vfs.NewMem()
	// Written without zeros ahead, so that the segment ends with its last
	// record and damage can be placed from the end; the reopened log
	// writes zeros ahead again.
	l := openLog(t, mem, "wal", Options{Preallocate: -1})
	appendRange(t, l, 1, 20, 5)
	mustClose(t, l)
	name := filepath.Join("wal", segmentName(1))
	writeAll(t, mem, name, damage(readAll(t, mem, name)))

	var logged bytes.Buffer
	l = openLog(t, mem, "wal", Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if l.LastLSN() != wantLast {
		t.Fatalf("after cut: LastLSN %d, want %d", l.LastLSN(), wantLast)
	}
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "torn tail") {
		t.Errorf("the cut was not logged at Warn; log: %q", logged.String())
	}
	checkReplay(t, l, 0, wantLast)
	appendRange(t, l, wantLast+1, 30, 4)
	mustClose(t, l)

	l = openLog(t, mem, "wal", Options{})
	defer mustClose(t, l)
	checkReplay(t, l, 0, 30)
}

// recordOffset returns the offset of record lsn in a segment whose first
// record is lsn 1 and whose records are payload(lsn).
func recordOffset(lsn uint64) int {
	off := segmentHeaderSize
	for i := uint64(1); i < lsn; i++ {
		off += recordHeaderSize + len(payload(i))
	}
	return off
}

func TestTornTailTruncatedMidRecord(t *testing.T) {
	cutLog(t, 19, func(seg []byte) []byte { return seg[:len(seg)-3] })
}

func TestTornTailMidHeader(t *testing.T) {
	cutLog(t, 19, func(seg []byte) []byte { return seg[:recordOffset(20)+5] })
}

func TestTornTailFlippedByte(t *testing.T) {
	cutLog(t, 19, func(seg []byte) []byte {
		seg[len(seg)-1] ^= 0x40
		return seg
	})
}

// TestNoRecordBeyondZeros: a record that lies beyond a header of zeros (a
// torn write whose first sector never reached the disk) is never read
// back, even once new records are written in front of it and line up with
// it exactly.
func TestNoRecordBeyondZeros(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, "wal", Options{Preallocate: -1})
	appendRange(t, l, 1, 20, 5)
	mustClose(t, l)
	name := filepath.Join("wal", segmentName(1))
	seg := readAll(t, mem, name)
	lost := []byte("the record 21 the crash lost")
	var hdr [recordHeaderSize]byte
	stray := payload(22)
	putRecordHeader(&hdr, 22, stray)
	seg = append(seg, make([]byte, recordHeaderSize+len(lost))...) // 21, never written
	seg = append(append(seg, hdr[:]...), stray...)                 // 22, written
	writeAll(t, mem, name, seg)

	// Without zeros ahead, so that only the cut at Open stands between
	// the new record and the stray one.
	l = openLog(t, mem, "wal", Options{Preallocate: -1})
	if l.LastLSN() != 20 {
		t.Fatalf("LastLSN %d after the zeros, want 20", l.LastLSN())
	}
	if _, err := l.Append(lost); err != nil { // lands where 21 was lost
		t.Fatal(err)
	}
	mustClose(t, l)
	l = openLog(t, mem, "wal", Options{})
	defer mustClose(t, l)
	if l.LastLSN() != 21 {
		t.Fatalf("LastLSN %d: the stray record 22 came back", l.LastLSN())
	}
}

// TestZerosAfterRecords: zeros after the last record (written ahead by the
// log, or a file system's extension never written) end the log without a
// warning, every record survives, and appends go where the zeros were.
func TestZerosAfterRecords(t *testing.T) {
	for _, zeros := range []int{4096, recordHeaderSize, 3} {
		mem := vfs.NewMem()
		l := openLog(t, mem, "wal", Options{Preallocate: -1})
		appendRange(t, l, 1, 20, 5)
		mustClose(t, l)
		name := filepath.Join("wal", segmentName(1))
		end := len(readAll(t, mem, name))
		writeAll(t, mem, name, append(readAll(t, mem, name), make([]byte, zeros)...))

		var logged bytes.Buffer
		l = openLog(t, mem, "wal", Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		if l.LastLSN() != 20 {
			t.Fatalf("%d zeros: LastLSN %d, want 20", zeros, l.LastLSN())
		}
		if zeros >= recordHeaderSize && logged.Len() != 0 {
			t.Errorf("%d zeros: logged %q, want nothing", zeros, logged.String())
		}
		appendRange(t, l, 21, 30, 4)
		mustClose(t, l)
		seg := readAll(t, mem, name)
		if got := binary.LittleEndian.Uint64(seg[end+8:]); got != 21 {
			t.Errorf("%d zeros: the record after lsn 20 carries lsn %d, want 21", zeros, got)
		}
		l = openLog(t, mem, "wal", Options{})
		checkReplay(t, l, 0, 30)
		mustClose(t, l)
	}
}

func TestTornTailAbsurdLength(t *testing.T) {
	cutLog(t, 20, func(seg []byte) []byte {
		var hdr [recordHeaderSize]byte
		putRecordHeader(&hdr, 21, nil)
		binary.LittleEndian.PutUint32(hdr[0:4], 0xfffffff0)
		return append(append(seg, hdr[:]...), "short"...)
	})
}

func TestTornTailCutsEverythingAfterBadRecord(t *testing.T) {
	cutLog(t, 11, func(seg []byte) []byte {
		seg[recordOffset(12)+recordHeaderSize] ^= 1 // payload of lsn 12
		return seg
	})
}

func TestTornTailWrongLSN(t *testing.T) {
	cutLog(t, 15, func(seg []byte) []byte {
		// A well-formed record carrying the wrong lsn ends the log too.
		var hdr [recordHeaderSize]byte
		rec := payload(16)
		putRecordHeader(&hdr, 99, rec)
		out := append(seg[:recordOffset(16):recordOffset(16)], hdr[:]...)
		return append(out, rec...)
	})
}

func TestTornSegmentHeader(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, "wal", Options{SegmentSize: 1 << 10})
	appendRange(t, l, 1, 100, 10)
	mustClose(t, l)
	segs := segmentFiles(t, mem, "wal")
	tail := segs[len(segs)-1]
	name := filepath.Join("wal", tail.name)
	writeAll(t, mem, name, readAll(t, mem, name)[:5])

	l = openLog(t, mem, "wal", Options{SegmentSize: 1 << 10})
	if want := tail.first - 1; l.LastLSN() != want {
		t.Fatalf("LastLSN %d, want %d", l.LastLSN(), want)
	}
	checkReplay(t, l, 0, tail.first-1)
	appendRange(t, l, tail.first, 120, 10)
	mustClose(t, l)
	l = openLog(t, mem, "wal", Options{SegmentSize: 1 << 10})
	defer mustClose(t, l)
	checkReplay(t, l, 0, 120)
}

func TestCorruptMiddleSegment(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, "wal", Options{SegmentSize: 1 << 10})
	appendRange(t, l, 1, 100, 10)
	mustClose(t, l)
	segs := segmentFiles(t, mem, "wal")
	if len(segs) < 3 {
		t.Fatalf("only %d segments", len(segs))
	}
	name := filepath.Join("wal", segs[1].name)
	seg := readAll(t, mem, name)
	seg[len(seg)-1] ^= 1
	writeAll(t, mem, name, seg)

	if _, err := Open(mem, "wal", Options{Logger: quiet}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a damaged middle segment: err = %v, want ErrCorrupt", err)
	}
	// Open changed nothing: the damaged segment and those after it are all
	// still there for an operator to look at.
	if got := segmentFiles(t, mem, "wal"); len(got) != len(segs) {
		t.Fatalf("Open left %d segments of %d", len(got), len(segs))
	}
	if !bytes.Equal(readAll(t, mem, name), seg) {
		t.Fatal("Open changed the damaged segment")
	}
}

func TestCorruptEarlierSegmentBeforeEmptyLast(t *testing.T) {
	// The last segment has no records, but its existence says the one
	// before it was complete when it was created.
	mem := vfs.NewMem()
	l := openLog(t, mem, "wal", Options{})
	appendRange(t, l, 1, 10, 10)
	if err := l.TruncateBefore(5); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateBefore(10); err != nil { // rolls to an empty segment
		t.Fatal(err)
	}
	mustClose(t, l)
	// Put back the segment the log just removed, cut short after lsn 7.
	var recs []byte
	recs = appendSegmentHeader(recs)
	for lsn := uint64(1); lsn <= 7; lsn++ {
		var hdr [recordHeaderSize]byte
		putRecordHeader(&hdr, lsn, payload(lsn))
		recs = append(append(recs, hdr[:]...), payload(lsn)...)
	}
	writeAll(t, mem, filepath.Join("wal", segmentName(1)), recs)
	if _, err := Open(mem, "wal", Options{Logger: quiet}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: err = %v, want ErrCorrupt", err)
	}
}

func TestMissingMiddleSegment(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, "wal", Options{SegmentSize: 1 << 10})
	appendRange(t, l, 1, 100, 10)
	mustClose(t, l)
	segs := segmentFiles(t, mem, "wal")
	if err := mem.Remove(filepath.Join("wal", segs[1].name)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(mem, "wal", Options{Logger: quiet}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a missing segment: err = %v, want ErrCorrupt", err)
	}
}

func TestUnsupportedVersion(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, "wal", Options{})
	appendRange(t, l, 1, 3, 3)
	mustClose(t, l)
	name := filepath.Join("wal", segmentName(1))
	seg := readAll(t, mem, name)
	binary.LittleEndian.PutUint32(seg[len(segmentMagic):], 7)
	writeAll(t, mem, name, seg)
	_, err := Open(mem, "wal", Options{Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "version 7") {
		t.Fatalf("Open of a version 7 segment: err = %v", err)
	}
	if got := readAll(t, mem, name); !bytes.Equal(got, seg) {
		t.Fatal("Open cut a segment of an unknown version")
	}
}

func TestRecordTooLarge(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "wal", Options{})
	defer mustClose(t, l)
	_, err := l.Append(payload(1), make([]byte, MaxRecordSize+1))
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Append of an oversized record: err = %v, want ErrRecordTooLarge", err)
	}
	// Nothing of the batch was appended, and the log still works.
	if last, err := l.Append(payload(1)); err != nil || last != 1 {
		t.Fatalf("Append after a refused batch = %d, %v; want 1, nil", last, err)
	}
}

func TestClosed(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "wal", Options{})
	mustClose(t, l)
	if _, err := l.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
	if err := l.Replay(0, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Replay after Close: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestOpenCreatesDirDurably(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, "a/b/wal", Options{})
	appendRange(t, l, 1, 5, 5)
	crashed := mem.Crash()
	l = openLog(t, crashed, "a/b/wal", Options{})
	defer mustClose(t, l)
	checkReplay(t, l, 0, 5)
}

func TestFailedSyncStopsTheLog(t *testing.T) {
	mem := vfs.NewMem()
	failSync := false
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, name string) error {
		if op == vfs.OpSync && failSync {
			return vfs.ErrInjected
		}
		return nil
	})
	l := openLog(t, fsys, "wal", Options{})
	appendRange(t, l, 1, 5, 5)
	if _, err := l.Append(payload(6), payload(7)); err != nil {
		t.Fatal(err)
	}
	failSync = true
	if err := l.Sync(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Sync: err = %v, want the injected fault", err)
	}
	if l.SyncedLSN() != 5 {
		t.Fatalf("SyncedLSN %d after a failed Sync, want 5", l.SyncedLSN())
	}
	failSync = false
	// A failed fsync cannot be retried: the log stays failed.
	if err := l.Sync(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Sync after a failed Sync: err = %v, want the earlier fault", err)
	}
	if _, err := l.Append(payload(8)); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Append after a failed Sync: err = %v, want the earlier fault", err)
	}
	l.Close()

	l = openLog(t, mem.Crash(), "wal", Options{})
	defer mustClose(t, l)
	if l.LastLSN() != 5 {
		t.Fatalf("after crash: LastLSN %d, want 5", l.LastLSN())
	}
	checkReplay(t, l, 0, 5)
}

func TestFailedWriteStopsTheLog(t *testing.T) {
	mem := vfs.NewMem()
	failWrite := false
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && failWrite {
			return vfs.ErrInjected
		}
		return nil
	})
	l := openLog(t, fsys, "wal", Options{})
	appendRange(t, l, 1, 5, 5)
	failWrite = true
	if _, err := l.Append(payload(6)); err != nil {
		t.Fatal(err) // buffered: nothing written yet
	}
	if err := l.Sync(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Sync: err = %v, want the injected fault", err)
	}
	if _, err := l.Append(payload(7)); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Append after a failed write: err = %v, want the earlier fault", err)
	}
	l.Close()
	failWrite = false
	l = openLog(t, fsys, "wal", Options{})
	defer mustClose(t, l)
	checkReplay(t, l, 0, 5)
}

func TestTruncateBefore(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		opts := Options{SegmentSize: 2 << 10}
		l := openLog(t, fsys, dir, opts)
		appendRange(t, l, 1, 300, 10)
		before := segmentFiles(t, fsys, dir)

		if err := l.TruncateBefore(150); err != nil {
			t.Fatal(err)
		}
		after := segmentFiles(t, fsys, dir)
		if len(after) >= len(before) {
			t.Fatalf("TruncateBefore(150) left %d of %d segments", len(after), len(before))
		}
		if after[0].first > 151 {
			t.Fatalf("TruncateBefore(150) removed lsn 151: oldest segment starts at %d", after[0].first)
		}
		if len(after) > 1 && after[1].first <= 151 {
			t.Fatalf("TruncateBefore(150) kept segment %s, all of whose records are older", after[0].name)
		}
		checkReplay(t, l, 150, 300)
		if err := l.Replay(0, func(uint64, []byte) error { return nil }); !errors.Is(err, ErrTruncated) {
			t.Fatalf("Replay(0) after truncation: err = %v, want ErrTruncated", err)
		}
		if err := l.TruncateBefore(301); err == nil {
			t.Fatal("TruncateBefore past the last lsn succeeded")
		}
		mustClose(t, l)

		l = openLog(t, fsys, dir, opts)
		checkReplay(t, l, 150, 300)

		// A checkpoint at the last lsn: every segment can go.
		if err := l.TruncateBefore(300); err != nil {
			t.Fatal(err)
		}
		segs := segmentFiles(t, fsys, dir)
		if len(segs) != 1 || segs[0].first != 301 {
			t.Fatalf("after TruncateBefore(last): segments %v, want one starting at 301", segs)
		}
		checkReplay(t, l, 300, 300)
		mustClose(t, l)

		l = openLog(t, fsys, dir, opts)
		defer mustClose(t, l)
		if l.LastLSN() != 300 {
			t.Fatalf("reopened after truncating everything: LastLSN %d, want 300", l.LastLSN())
		}
		appendRange(t, l, 301, 310, 5)
		checkReplay(t, l, 300, 310)
	})
}

func TestTruncateBeforeSurvivesCrash(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, "wal", Options{SegmentSize: 1 << 10})
	appendRange(t, l, 1, 200, 10)
	if err := l.TruncateBefore(200); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, mem.Crash(), "wal", Options{SegmentSize: 1 << 10})
	defer mustClose(t, l)
	if l.LastLSN() != 200 {
		t.Fatalf("LastLSN %d, want 200", l.LastLSN())
	}
	if last, err := l.Append([]byte("next")); err != nil || last != 201 {
		t.Fatalf("Append = %d, %v; want 201, nil", last, err)
	}
}

func TestAppendDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	l := openLog(t, vfs.NewMem(), "wal", Options{SegmentSize: 1 << 40})
	defer mustClose(t, l)
	batch := make([][]byte, 16)
	for i := range batch {
		batch[i] = payload(uint64(i))
	}
	// Over 5000 runs of 16 records the buffer is written out many times; the
	// MemFS file growing underneath is the only allocation, amortized.
	allocs := testing.AllocsPerRun(5000, func() {
		if _, err := l.Append(batch...); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Append allocates %v times per batch", allocs)
	}
}

// TestZerosAheadKeptAndCut: the last segment keeps between half and all of
// Preallocate bytes of zeros after its records, topped up as records fill
// it, and a segment the log has moved on from ends with its last record.
func TestZerosAheadKeptAndCut(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const ahead = 8 << 10
		l := openLog(t, fsys, dir, Options{SegmentSize: 64 << 10, Preallocate: ahead})
		for lsn := uint64(1); lsn <= 400; lsn++ {
			appendRange(t, l, lsn, lsn, 1)
			size, err := fsys.Size(filepath.Join(dir, l.current().name))
			if err != nil {
				t.Fatal(err)
			}
			if zeros := size - l.segSize; zeros < ahead/2 || zeros > ahead {
				t.Fatalf("after lsn %d: %d bytes after the records, want %d to %d", lsn, zeros, ahead/2, ahead)
			}
		}
		mustClose(t, l)
		segs := segmentFiles(t, fsys, dir)
		if len(segs) < 2 {
			t.Fatalf("%d segments, want several", len(segs))
		}
		for _, seg := range segs[:len(segs)-1] {
			data := readAll(t, fsys, filepath.Join(dir, seg.name))
			if tail := data[len(data)-recordHeaderSize:]; bytes.Equal(tail, make([]byte, recordHeaderSize)) {
				t.Errorf("segment %s, not the last, ends with zeros", seg.name)
			}
		}
		l = openLog(t, fsys, dir, Options{SegmentSize: 64 << 10, Preallocate: ahead})
		defer mustClose(t, l)
		checkReplay(t, l, 0, 400)
	})
}
