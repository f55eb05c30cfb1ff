package wal

import (
	"fmt"
	"slices"
)

// TruncateBefore removes the segments all of whose records have lsns at or
// below lsn, typically once a checkpoint taken at lsn is durable. Records
// after lsn are kept, and usually some at or below it too: only whole
// segments go. If every record of the current segment is at or below lsn,
// TruncateBefore first syncs it and moves on to a new, empty segment, so
// that it can be removed as well.
func (l *Log) TruncateBefore(lsn uint64) error {
	if err := l.usable(); err != nil {
		return err
	}
	last := l.lastLSN.Load()
	if lsn > last {
		return fmt.Errorf("truncate log %s before lsn %d: past the last lsn %d", l.dir, lsn, last)
	}
	if lsn == last && last >= l.current().first {
		if err := l.roll(); err != nil {
			return l.fail(fmt.Errorf("truncate log %s before lsn %d: %w", l.dir, lsn, err))
		}
		// Once the old segments are gone, the new one's name is all that
		// carries the lsns on. Make it durable, header and entry, before
		// removing anything, rather than rely on Open's handling of a torn
		// segment header.
		if err := l.Sync(); err != nil {
			return err
		}
	}

	// Segment i holds lsns [segments[i].first, segments[i+1].first).
	n := 0
	for n+1 < len(l.segments) && l.segments[n+1].first-1 <= lsn {
		n++
	}
	if n == 0 {
		return nil
	}
	// Oldest first, so that a crash part-way leaves the log contiguous.
	for i, seg := range l.segments[:n] {
		if err := l.fs.Remove(l.path(seg.name)); err != nil {
			l.segments = slices.Delete(l.segments, 0, i)
			return fmt.Errorf("remove segment %s: %w", seg.name, err)
		}
	}
	l.segments = slices.Delete(l.segments, 0, n)
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("sync log dir %s: %w", l.dir, err))
	}
	return nil
}
