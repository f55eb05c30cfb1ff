package wal

import (
	"bufio"
	"fmt"
	"io"
)

// Replay calls fn with every record whose lsn is greater than after, in
// order. rec is valid only until fn returns. If fn returns an error, Replay
// stops and returns it.
//
// Replay reads from the segment files, so it sees records appended but not
// yet synced too (it writes them out of the buffer first). It returns an
// error wrapping ErrTruncated if records after after have been removed by
// TruncateBefore, and one wrapping ErrCorrupt if a record fails its check.
func (l *Log) Replay(after uint64, fn func(lsn uint64, rec []byte) error) error {
	if err := l.usable(); err != nil {
		return err
	}
	last := l.lastLSN.Load()
	if after >= last {
		return nil
	}
	if oldest := l.segments[0].first; after+1 < oldest {
		return fmt.Errorf("replay log %s after lsn %d: oldest record is lsn %d: %w", l.dir, after, oldest, ErrTruncated)
	}
	if err := l.bw.Flush(); err != nil {
		return l.fail(fmt.Errorf("write segment %s: %w", l.current().name, err))
	}

	// Start in the last segment that begins at or before after+1.
	start := 0
	for start+1 < len(l.segments) && l.segments[start+1].first <= after+1 {
		start++
	}
	br := bufio.NewReaderSize(nil, l.opts.bufferSize)
	next := after + 1 // lsn of the next record fn must see
	for _, seg := range l.segments[start:] {
		if err := l.replaySegment(seg, br, after, last, &next, fn); err != nil {
			return err
		}
	}
	if next != last+1 {
		return fmt.Errorf("replay log %s: records end at lsn %d, want %d: %w", l.dir, next-1, last, ErrCorrupt)
	}
	return nil
}

// replaySegment calls fn with the records of seg whose lsns lie in
// (after, last], advancing *next past each.
func (l *Log) replaySegment(seg segment, br *bufio.Reader, after, last uint64, next *uint64, fn func(uint64, []byte) error) error {
	s, err := openSegment(l.fs, l.dir, seg, br)
	if s != nil {
		defer s.Close()
	}
	if err != nil {
		return fmt.Errorf("replay log %s: %w", l.dir, err)
	}
	for {
		lsn, rec, err := s.nextRecord()
		if err == io.EOF {
			return nil
		}
		if d, ok := err.(*damageError); ok && d.zeros && *next > last {
			return nil // the zeros written ahead of the last segment's records
		}
		if err != nil {
			return fmt.Errorf("replay segment %s: %w", seg.name, err)
		}
		if lsn > last {
			return nil
		}
		if lsn <= after {
			continue
		}
		if lsn != *next {
			return fmt.Errorf("replay segment %s: found lsn %d, want %d: %w", seg.name, lsn, *next, ErrCorrupt)
		}
		if err := fn(lsn, rec); err != nil {
			return err
		}
		*next = lsn + 1
		if lsn == last {
			return nil // what follows is zeros written ahead, or records appended since
		}
	}
}
