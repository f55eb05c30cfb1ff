package wal

import (
	"bufio"
	"fmt"
	"io"
	"slices"
)

// TruncateAfter removes every record whose lsn is greater than lsn, so that
// the next Append gets lsn+1: a Raft follower does this when a new leader
// overwrites entries of an older term. Records at or below lsn are kept.
//
// The removal is durable when TruncateAfter returns: the segments wholly
// after lsn are removed (newest first) and the directory synced, then the
// segment holding lsn+1 is cut at that record and synced. A crash part-way
// leaves a prefix of the old log, which is what it was before the call; a
// crash afterwards never brings the removed records back. lsn must be at
// least the lsn before the oldest record kept (see FirstLSN).
func (l *Log) TruncateAfter(lsn uint64) error {
	if err := l.usable(); err != nil {
		return err
	}
	last := l.lastLSN.Load()
	if lsn >= last {
		return nil
	}
	if lsn+1 < l.segments[0].first {
		return fmt.Errorf("truncate log %s after lsn %d: oldest record is lsn %d: %w", l.dir, lsn, l.segments[0].first, ErrTruncated)
	}
	if err := l.bw.Flush(); err != nil {
		return l.fail(fmt.Errorf("write segment %s: %w", l.current().name, err))
	}
	// The segment that holds lsn+1: the last one starting at or before it.
	keep := 0
	for keep+1 < len(l.segments) && l.segments[keep+1].first <= lsn+1 {
		keep++
	}
	seg := l.segments[keep]
	off, err := l.recordOffset(seg, lsn+1)
	if err != nil {
		return l.fail(fmt.Errorf("truncate log %s after lsn %d: %w", l.dir, lsn, err))
	}

	f := l.f
	l.f = nil
	if err := f.Close(); err != nil {
		return l.fail(fmt.Errorf("close segment %s: %w", l.current().name, err))
	}
	for i := len(l.segments) - 1; i > keep; i-- {
		if err := l.fs.Remove(l.path(l.segments[i].name)); err != nil {
			return l.fail(fmt.Errorf("remove segment %s: %w", l.segments[i].name, err))
		}
	}
	l.segments = slices.Delete(l.segments, keep+1, len(l.segments))
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("sync log dir %s: %w", l.dir, err))
	}
	l.dirDirty = false
	path := l.path(seg.name)
	if err := l.fs.Truncate(path, off); err != nil {
		return l.fail(fmt.Errorf("truncate segment %s to %d bytes: %w", seg.name, off, err))
	}
	f, err = l.fs.OpenWrite(path)
	if err != nil {
		return l.fail(fmt.Errorf("open segment %s: %w", seg.name, err))
	}
	l.attach(f, off)
	if err := l.f.Sync(); err != nil {
		return l.fail(fmt.Errorf("sync segment %s: %w", seg.name, err))
	}
	l.lastLSN.Store(lsn)
	if l.syncedLSN.Load() > lsn {
		l.syncedLSN.Store(lsn)
	}
	return nil
}

// recordOffset returns the byte offset of record lsn in seg, or the
// segment's length if lsn is the one after its last record.
func (l *Log) recordOffset(seg segment, lsn uint64) (int64, error) {
	br := bufio.NewReaderSize(nil, l.opts.bufferSize)
	s, err := openSegment(l.fs, l.dir, seg, br)
	if s != nil {
		defer s.Close()
	}
	if err != nil {
		return 0, err
	}
	for s.next < lsn {
		if _, _, err := s.nextRecord(); err != nil {
			if err == io.EOF {
				err = fmt.Errorf("segment %s ends at lsn %d, before lsn %d: %w", seg.name, s.next-1, lsn, ErrCorrupt)
			}
			return 0, err
		}
	}
	return s.off, nil
}

// FirstLSN returns the lsn of the oldest record the log holds, or the lsn
// the next record will get if it holds none.
func (l *Log) FirstLSN() uint64 { return l.segments[0].first }

// Reset removes every record and makes next the lsn of the next record
// appended: a Raft replica does this once it has installed a snapshot taken
// at next-1, which replaces its whole log. The old segments are removed
// oldest first, then the new empty segment log-<next>.wal is created, and
// both made durable before Reset returns. A crash part-way leaves a suffix
// of the old log, or an empty one starting at lsn 1; either way the caller,
// which has made the snapshot durable first, can tell from FirstLSN and
// LastLSN that the reset did not happen, and call Reset again.
func (l *Log) Reset(next uint64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if next == 0 {
		return fmt.Errorf("reset log %s: lsn 0 is not a record's", l.dir)
	}
	f := l.f
	l.f = nil
	l.bw.Reset(nil)
	if err := f.Close(); err != nil {
		return l.fail(fmt.Errorf("close segment %s: %w", l.current().name, err))
	}
	for i, seg := range l.segments {
		if err := l.fs.Remove(l.path(seg.name)); err != nil {
			l.segments = slices.Delete(l.segments, 0, i)
			return l.fail(fmt.Errorf("remove segment %s: %w", seg.name, err))
		}
	}
	l.segments = l.segments[:0]
	if err := l.startSegment(next); err != nil {
		return l.fail(err)
	}
	l.lastLSN.Store(next - 1)
	return l.Sync() // a segment was created, so Sync syncs it and the directory
}
