package wal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// check reads every segment, oldest first, and applies the recovery rule:
// damage in the last segment is a torn tail, returned for Open to cut;
// damage anywhere else, or a gap between segments, is an error wrapping
// ErrCorrupt. It returns the lsn of the last valid record.
func (l *Log) check(segs []segment) (last uint64, tail *damageError, err error) {
	br := bufio.NewReaderSize(nil, l.opts.bufferSize)
	next := segs[0].first
	for i, seg := range segs {
		if seg.first != next {
			return 0, nil, fmt.Errorf("segment %s starts at lsn %d, want %d: %w", seg.name, seg.first, next, ErrCorrupt)
		}
		next, err = l.scanSegment(seg, br)
		var damage *damageError
		switch {
		case errors.As(err, &damage) && i == len(segs)-1:
			return next - 1, damage, nil
		case damage != nil:
			return 0, nil, fmt.Errorf("segment %s, followed by %d more, is damaged: %w", seg.name, len(segs)-1-i, err)
		case err != nil:
			return 0, nil, fmt.Errorf("segment %s: %w", seg.name, err)
		}
	}
	return next - 1, nil, nil
}

// scanSegment reads every record of seg and returns the lsn after the last
// valid one. If the segment is damaged the error is a *damageError.
func (l *Log) scanSegment(seg segment, br *bufio.Reader) (next uint64, err error) {
	s, err := openSegment(l.fs, l.dir, seg, br)
	if s != nil {
		defer s.Close()
	}
	if err != nil {
		return seg.first, err
	}
	for {
		_, _, err := s.nextRecord()
		if err == io.EOF {
			return s.next, nil
		}
		if err != nil {
			return s.next, err
		}
	}
}
