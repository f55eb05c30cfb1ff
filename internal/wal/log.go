package wal

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"

	"github.com/canopyfs/canopy/internal/vfs"
)

// DefaultSegmentSize is the segment size used when Options.SegmentSize is
// zero.
const DefaultSegmentSize = 64 << 20

// DefaultPreallocate is how far ahead of its records the last segment is
// written with zeros when Options.Preallocate is zero.
const DefaultPreallocate = 1 << 20

// Options configure a Log.
type Options struct {
	// SegmentSize is the size past which the log moves on to a new
	// segment file. Zero means DefaultSegmentSize.
	SegmentSize int64

	// Preallocate is how many bytes of zeros the last segment keeps
	// written ahead of its records. A sync then rewrites space the file
	// system already holds, and with fdatasync commits no metadata: on
	// ext4 that halves the cost of a sync. The zeros are written again
	// whenever fewer than half remain, and made durable by the next sync;
	// that sync alone pays for the file's growth. Zero means
	// DefaultPreallocate; a negative value writes no zeros, and the
	// segment grows with every sync.
	Preallocate int64

	// Logger receives a warning whenever Open cuts a torn tail off the
	// log. Nil means slog.Default().
	Logger *slog.Logger

	// bufferSize is the size of the write and read buffers; zero means
	// 256 KiB. Tests make it small, so that appends reach the file system
	// between syncs.
	bufferSize int
}

// Log is an open transaction log. See the package documentation for its
// format and the rules by which Open recovers it.
//
// A Log is owned by one goroutine at a time, in Canopy the commit
// goroutine: Append, Sync, Replay, TruncateBefore and Close must not run
// concurrently. LastLSN and SyncedLSN may be called from any goroutine.
//
// After a write or sync fails, the Log refuses further writes: what reached
// the disk is unknown, and a failed fsync cannot be retried safely. Close it
// and Open the log again, which recovers whatever was made durable.
type Log struct {
	fs     vfs.FS
	dir    string
	opts   Options
	logger *slog.Logger

	// Owned by the goroutine using the Log.
	segments []segment // oldest first; the last is the one appended to
	f        vfs.File  // the last segment, open for appending
	bw       *bufio.Writer
	segSize  int64 // bytes in the last segment, counting those still in bw
	allocEnd int64 // the last segment file's size: its records, then zeros
	dirDirty bool  // a segment was created since the directory was last synced
	hdr      [recordHeaderSize]byte
	err      error // the write or sync failure that stopped the Log
	closed   bool

	// Written by the owning goroutine, read by any.
	lastLSN   atomic.Uint64 // last record appended
	syncedLSN atomic.Uint64 // last record known durable

	// asyncErr is the failure of a SyncFlushed (flush.go), set from the
	// goroutine that ran it; it stops the Log like err.
	asyncErr atomic.Pointer[error]
}

// Open opens the log in dir, creating dir and an empty log if needed. It
// checks every segment, cuts a torn tail off the last one (logging what it
// cut at Warn), and positions the log to append after the last valid
// record. It returns an error wrapping ErrCorrupt if records that were
// durable are damaged or missing; see the package documentation.
func Open(fsys vfs.FS, dir string, opts Options) (*Log, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.Preallocate == 0 {
		opts.Preallocate = DefaultPreallocate
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.bufferSize <= 0 {
		opts.bufferSize = bufferSize
	}
	l := &Log{
		fs:     fsys,
		dir:    dir,
		opts:   opts,
		logger: opts.Logger,
		bw:     bufio.NewWriterSize(nil, opts.bufferSize),
	}
	if err := l.open(); err != nil {
		if l.f != nil {
			l.f.Close()
		}
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	return l, nil
}

func (l *Log) open() error {
	if err := ensureDir(l.fs, l.dir); err != nil {
		return err
	}
	segs, err := listSegments(l.fs, l.dir)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		if err := l.startSegment(1); err != nil {
			return err
		}
		return l.Sync()
	}

	last, damage, err := l.check(segs)
	if err != nil {
		return err
	}
	l.lastLSN.Store(last)
	l.syncedLSN.Store(last)
	tail := segs[len(segs)-1]
	path := l.path(tail.name)
	size, err := l.fs.Size(path)
	if err != nil {
		return fmt.Errorf("stat segment %s: %w", tail.name, err)
	}
	end := size
	if damage != nil {
		end = damage.off
		if !damage.zeros {
			l.logger.Warn("wal: cutting torn tail off the log",
				"dir", l.dir, "segment", tail.name, "offset", damage.off,
				"bytes", size-damage.off, "last_lsn", last, "reason", damage.reason)
		}
		if damage.off < int64(segmentHeaderSize) {
			// Not even the header survived: start the segment afresh under
			// the same name, which carries the lsns on.
			l.segments = segs[:len(segs)-1]
			if err := l.startSegment(tail.first); err != nil {
				return err
			}
			return l.Sync()
		}
	}
	// Whatever follows the last record goes, zeros written ahead
	// included: bytes of a torn write beyond them must never be read as
	// records once new ones are written in front of them.
	if end < size {
		if err := l.fs.Truncate(path, end); err != nil {
			return fmt.Errorf("truncate segment %s to %d bytes: %w", tail.name, end, err)
		}
	}

	l.segments = segs
	f, err := l.fs.OpenWrite(path)
	if err != nil {
		return fmt.Errorf("open segment %s: %w", tail.name, err)
	}
	l.attach(f, end)
	if end < size {
		// Make the truncation durable before anything is appended after it.
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync segment %s: %w", tail.name, err)
		}
	}
	return nil
}

// attach makes f, a segment file of size bytes ending with its last
// record, the one appended to.
func (l *Log) attach(f vfs.File, size int64) {
	l.f = f
	l.bw.Reset(io.NewOffsetWriter(f, size))
	l.segSize = size
	l.allocEnd = size
}

// zeros is what prepare writes ahead of the records; never written to.
var zeros = make([]byte, 64<<10)

// prepare writes zeros ahead of the records once fewer than half of
// Options.Preallocate bytes of them remain in the last segment. They are
// written past everything appended (segSize counts the bytes still in bw),
// so never over a record.
func (l *Log) prepare() error {
	want := l.opts.Preallocate
	if want <= 0 || l.allocEnd-l.segSize >= want/2 {
		return nil
	}
	off := max(l.allocEnd, l.segSize)
	for end := l.segSize + want; off < end; {
		n := min(int64(len(zeros)), end-off)
		if _, err := l.f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("write zeros ahead in segment %s at %d: %w", l.current().name, off, err)
		}
		off += n
	}
	l.allocEnd = off
	return nil
}

// path returns the path of the file named name in the log directory.
func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

// current returns the segment being appended to.
func (l *Log) current() segment { return l.segments[len(l.segments)-1] }

// usable returns the error that a write to the Log must fail with, if any.
func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	if l.err != nil {
		return fmt.Errorf("log %s failed earlier, reopen it: %w", l.dir, l.err)
	}
	if p := l.asyncErr.Load(); p != nil {
		return fmt.Errorf("log %s failed earlier, reopen it: %w: %w", l.dir, errSyncFailed, *p)
	}
	return nil
}

// fail records err as the failure that stops the Log, and returns it.
func (l *Log) fail(err error) error {
	if l.err == nil {
		l.err = err
	}
	return err
}

// LastLSN returns the lsn of the last record appended, or of the last
// record in the log when it was opened, or 0 for an empty new log.
func (l *Log) LastLSN() uint64 { return l.lastLSN.Load() }

// SyncedLSN returns the lsn of the last record known to be durable.
func (l *Log) SyncedLSN() uint64 { return l.syncedLSN.Load() }

// Append adds records to the log and returns the lsn of the last one; the
// first gets LastLSN()+1. The records are buffered, not synced: they are
// durable only once Sync returns. Append copies the records; the caller may
// reuse them when it returns. With no records, Append returns LastLSN().
func (l *Log) Append(recs ...[]byte) (last uint64, err error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	for _, rec := range recs {
		if len(rec) > MaxRecordSize {
			return 0, fmt.Errorf("append record of %d bytes: %w", len(rec), ErrRecordTooLarge)
		}
	}
	lsn := l.lastLSN.Load()
	for _, rec := range recs {
		if l.segSize >= l.opts.SegmentSize && l.segSize > int64(segmentHeaderSize) {
			if err := l.roll(); err != nil {
				return 0, l.fail(err)
			}
		}
		lsn++
		putRecordHeader(&l.hdr, lsn, rec)
		if _, err := l.bw.Write(l.hdr[:]); err != nil {
			return 0, l.fail(fmt.Errorf("append lsn %d to segment %s: %w", lsn, l.current().name, err))
		}
		if _, err := l.bw.Write(rec); err != nil {
			return 0, l.fail(fmt.Errorf("append lsn %d to segment %s: %w", lsn, l.current().name, err))
		}
		l.segSize += recordHeaderSize + int64(len(rec))
		l.lastLSN.Store(lsn)
	}
	return lsn, nil
}

// Sync makes every record appended so far durable: it flushes the buffer,
// syncs the segment, and syncs the log directory if a segment was created
// since it was last synced.
func (l *Log) Sync() error {
	if err := l.usable(); err != nil {
		return err
	}
	last := l.lastLSN.Load()
	if last == l.syncedLSN.Load() && !l.dirDirty && l.bw.Buffered() == 0 {
		return nil
	}
	name := l.current().name
	if err := l.prepare(); err != nil {
		return l.fail(err)
	}
	if err := l.bw.Flush(); err != nil {
		return l.fail(fmt.Errorf("write segment %s: %w", name, err))
	}
	if err := l.f.Datasync(); err != nil {
		return l.fail(fmt.Errorf("sync segment %s: %w", name, err))
	}
	if l.dirDirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("sync log dir %s: %w", l.dir, err))
		}
		l.dirDirty = false
	}
	// A plain store: last is at least every point Flush handed out
	// before it, and Reset may have moved the log back.
	l.syncedLSN.Store(last)
	return nil
}

// roll syncs the current segment, cuts the zeros written ahead off it,
// closes it and starts a new one. The recovery rule depends on the order:
// a segment is created only once every segment before it is durable,
// entry and all, and ends with its last record.
func (l *Log) roll() error {
	if err := l.Sync(); err != nil {
		return err
	}
	name := l.current().name
	if l.allocEnd > l.segSize {
		if err := l.fs.Truncate(l.path(name), l.segSize); err != nil {
			return fmt.Errorf("cut zeros off segment %s: %w", name, err)
		}
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("sync segment %s: %w", name, err)
		}
		l.allocEnd = l.segSize
	}
	f := l.f
	l.f = nil
	if err := f.Close(); err != nil {
		return fmt.Errorf("close segment %s: %w", name, err)
	}
	return l.startSegment(l.lastLSN.Load() + 1)
}

// startSegment creates the segment whose first record will carry lsn
// first, truncating any file of that name, and makes it the one appended
// to. Its header is buffered, not synced.
func (l *Log) startSegment(first uint64) error {
	name := segmentName(first)
	f, err := l.fs.Create(l.path(name))
	if err != nil {
		return fmt.Errorf("create segment %s: %w", name, err)
	}
	l.attach(f, 0)
	l.segments = append(l.segments, segment{first: first, name: name})
	l.dirDirty = true
	var hdr [segmentHeaderSize]byte
	if _, err := l.bw.Write(appendSegmentHeader(hdr[:0])); err != nil {
		return fmt.Errorf("write header of segment %s: %w", name, err)
	}
	l.segSize = int64(segmentHeaderSize)
	return nil
}

// Close syncs the log and closes it. A Log that had failed is closed
// without syncing.
func (l *Log) Close() error {
	if l.closed {
		return ErrClosed
	}
	var err error
	if l.err == nil {
		err = l.Sync()
	}
	l.closed = true
	if l.f != nil {
		if cerr := l.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close segment %s: %w", l.current().name, cerr)
		}
		l.f = nil
	}
	return err
}
