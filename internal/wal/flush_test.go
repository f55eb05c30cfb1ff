package wal

import (
	"testing"

	"github.com/canopyfs/canopy/internal/vfs"
)

// TestSyncFlushedWhileAppending: records flushed and synced on another
// goroutine, while the owner appends, rolls segments and flushes, are
// durable across a crash; records only flushed need not be.
func TestSyncFlushedWhileAppending(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, "wal", Options{SegmentSize: 4 << 10, bufferSize: 512})
	points := make(chan Flushed, 1)
	done := make(chan error)
	go func() {
		var err error
		for p := range points {
			if e := l.SyncFlushed(p); e != nil && err == nil {
				err = e
			}
		}
		done <- err
	}()
	const n = 400
	for lsn := uint64(1); lsn <= n; lsn++ {
		if _, err := l.Append(payload(lsn)); err != nil {
			t.Fatal(err)
		}
		p, err := l.Flush()
		if err != nil {
			t.Fatal(err)
		}
		if p.LSN() != lsn {
			t.Fatalf("flushed up to %d, want %d", p.LSN(), lsn)
		}
		select {
		case points <- p:
		default: // the syncer is busy: a later point covers this one
		}
	}
	p, err := l.Flush()
	if err != nil {
		t.Fatal(err)
	}
	points <- p
	close(points)
	if err := <-done; err != nil {
		t.Fatalf("SyncFlushed: %v", err)
	}
	if got := l.SyncedLSN(); got != n {
		t.Fatalf("SyncedLSN %d after the last SyncFlushed, want %d", got, n)
	}
	if len(l.segments) < 3 {
		t.Fatalf("only %d segments: the test meant to roll the log while syncing", len(l.segments))
	}
	// Five more records flushed, not synced, then the machine crashes.
	for lsn := uint64(n + 1); lsn <= n+5; lsn++ {
		if _, err := l.Append(payload(lsn)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	after := openLog(t, mem.Crash(), "wal", Options{})
	defer mustClose(t, after)
	if last := after.LastLSN(); last < n || last > n+5 {
		t.Fatalf("after the crash the log ends at %d, want %d to %d", last, n, n+5)
	}
	checkReplay(t, after, 0, after.LastLSN())
	mustClose(t, l)
}

// TestSyncFlushedOfClosedSegment: a point in a segment the owner synced
// and closed since is already durable, and syncing it succeeds.
func TestSyncFlushedOfClosedSegment(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "wal", Options{SegmentSize: 1 << 10})
	defer mustClose(t, l)
	if _, err := l.Append(payload(1)); err != nil {
		t.Fatal(err)
	}
	p, err := l.Flush()
	if err != nil {
		t.Fatal(err)
	}
	for lsn := uint64(2); len(l.segments) < 2; lsn++ { // roll: syncs and closes the first segment
		if _, err := l.Append(payload(lsn)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SyncFlushed(p); err != nil {
		t.Fatalf("SyncFlushed of a closed segment: %v", err)
	}
	if _, err := l.Append(payload(99)); err != nil {
		t.Fatalf("Append after it: %v", err)
	}
}
