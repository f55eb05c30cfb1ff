package wal

import "errors"

var (
	// ErrCorrupt reports that durable log or checkpoint data is damaged in
	// a way that recovery must not paper over.
	ErrCorrupt = errors.New("wal: corrupt")

	// ErrTruncated reports that Replay was asked for records that
	// TruncateBefore has already removed.
	ErrTruncated = errors.New("wal: records already truncated")

	// ErrRecordTooLarge reports a record longer than MaxRecordSize.
	ErrRecordTooLarge = errors.New("wal: record too large")

	// ErrClosed reports the use of a closed Log.
	ErrClosed = errors.New("wal: log closed")
)
