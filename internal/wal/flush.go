package wal

import (
	"errors"
	"fmt"

	"github.com/canopyfs/canopy/internal/vfs"
)

// Flushed is what one Flush wrote to the file system and not yet synced:
// the segment file and the last record it holds.
type Flushed struct {
	f   vfs.File
	lsn uint64
	dir bool // a segment was created since the directory was last synced
	seg string
}

// LSN is the last record the flush wrote.
func (p Flushed) LSN() uint64 { return p.lsn }

// NewSegment reports whether a segment was created since the owner last
// synced the log directory: a SyncFlushed of p syncs the directory too,
// as will every SyncFlushed until the owner's next Sync.
func (p Flushed) NewSegment() bool { return p.dir }

// Flush writes the records appended so far to the segment file, without
// syncing them, and returns what SyncFlushed must sync to make them
// durable. Like Append it belongs to the goroutine that owns the Log. A
// Flush with nothing new returns the last point flushed.
func (l *Log) Flush() (Flushed, error) {
	if err := l.usable(); err != nil {
		return Flushed{}, err
	}
	name := l.current().name
	if err := l.prepare(); err != nil {
		return Flushed{}, l.fail(err)
	}
	if err := l.bw.Flush(); err != nil {
		return Flushed{}, l.fail(fmt.Errorf("write segment %s: %w", name, err))
	}
	return Flushed{f: l.f, lsn: l.lastLSN.Load(), dir: l.dirDirty, seg: name}, nil
}

// SyncFlushed makes the records of p durable. Unlike every other method
// that writes, it may run on another goroutine at the same time as the
// owner's Append, Flush, Sync and TruncateBefore (one SyncFlushed at a
// time), so that the owner goes on appending while the disk syncs: an
// fsync of a file covers what was written to it before the fsync began,
// whoever wrote it. SyncedLSN moves to p's last record once it returns
// nil.
//
// A segment the owner has closed since (moving on to the next one) was
// synced by the owner before it was closed; syncing it then reports
// success. Any other failure is returned and makes the Log refuse further
// writes, as a failed Sync does.
func (l *Log) SyncFlushed(p Flushed) error {
	if p.f == nil || p.lsn <= l.syncedLSN.Load() {
		return nil
	}
	if err := p.f.Datasync(); err != nil {
		if p.lsn <= l.syncedLSN.Load() {
			return nil // the owner synced and closed the segment meanwhile
		}
		err = fmt.Errorf("sync segment %s: %w", p.seg, err)
		l.asyncErr.CompareAndSwap(nil, &err)
		return err
	}
	if p.dir {
		if err := l.fs.SyncDir(l.dir); err != nil {
			err = fmt.Errorf("sync log dir %s: %w", l.dir, err)
			l.asyncErr.CompareAndSwap(nil, &err)
			return err
		}
	}
	l.advanceSynced(p.lsn)
	return nil
}

// advanceSynced moves SyncedLSN up to lsn, never down: the owner's Sync
// and SyncFlushed may finish in either order.
func (l *Log) advanceSynced(lsn uint64) {
	for {
		cur := l.syncedLSN.Load()
		if lsn <= cur || l.syncedLSN.CompareAndSwap(cur, lsn) {
			return
		}
	}
}

// errSyncFailed marks the Log's refusal after a SyncFlushed failed.
var errSyncFailed = errors.New("a sync of flushed records failed")
