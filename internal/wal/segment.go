package wal

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/canopyfs/canopy/internal/vfs"
)

const (
	segmentMagic      = "canopywl"
	segmentVersion    = 1
	segmentHeaderSize = len(segmentMagic) + 4

	segmentPrefix = "log-"
	segmentSuffix = ".wal"
)

// bufferSize is the size of the buffers used to write and read segments
// and checkpoints.
const bufferSize = 256 << 10

// segment is one segment file of the log.
type segment struct {
	first uint64 // lsn of its first record, from its name
	name  string // file name within the log directory
}

// segmentName returns the file name of the segment whose first record is
// lsn first.
func segmentName(first uint64) string { return lsnName(segmentPrefix, first, segmentSuffix) }

// parseSegmentName returns the first lsn of the segment named name, or
// ok=false if name is not a segment's.
func parseSegmentName(name string) (first uint64, ok bool) {
	first, ok = parseLSNName(name, segmentPrefix, segmentSuffix)
	return first, ok && first != 0
}

// listSegments returns the segments in dir, oldest first.
func listSegments(fsys vfs.FS, dir string) ([]segment, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list log dir %s: %w", dir, err)
	}
	var segs []segment
	for _, name := range names {
		if first, ok := parseSegmentName(name); ok {
			segs = append(segs, segment{first: first, name: name})
		}
	}
	// Fixed-width names sort as their lsns do; sort anyway, to not depend
	// on it.
	slices.SortFunc(segs, func(a, b segment) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	return segs, nil
}

// appendSegmentHeader appends a segment header to b.
func appendSegmentHeader(b []byte) []byte {
	b = append(b, segmentMagic...)
	return binary.LittleEndian.AppendUint32(b, segmentVersion)
}

// damageError marks where, and why, a segment stops holding valid
// records. It wraps ErrCorrupt: whether the damage is a torn tail to cut or
// corruption to report is for the caller to decide.
type damageError struct {
	off    int64 // offset of the first invalid byte
	reason string
	zeros  bool // a header of zeros: the space written ahead of the records
}

func (e *damageError) Error() string {
	return fmt.Sprintf("%v at offset %d: %s", ErrCorrupt, e.off, e.reason)
}

func (e *damageError) Unwrap() error { return ErrCorrupt }

// segmentReader reads the records of one segment in order, checking each.
type segmentReader struct {
	name string // file name, for errors
	f    vfs.File
	r    *bufio.Reader
	size int64  // bytes in the segment when it was opened
	off  int64  // offset of the next unread byte
	next uint64 // lsn the next record must carry
	hdr  [recordHeaderSize]byte
	buf  []byte // payload of the last record read
}

// openSegment opens the segment seg in dir for reading through br, and
// reads and checks its header. It returns a *damageError if the header is
// torn or not a segment header at all. Whenever the returned reader is not
// nil, whatever the error, the caller must close it.
func openSegment(fsys vfs.FS, dir string, seg segment, br *bufio.Reader) (*segmentReader, error) {
	path := filepath.Join(dir, seg.name)
	size, err := fsys.Size(path)
	if err != nil {
		return nil, fmt.Errorf("stat segment %s: %w", seg.name, err)
	}
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", seg.name, err)
	}
	br.Reset(f)
	s := &segmentReader{name: seg.name, f: f, r: br, size: size, next: seg.first}
	return s, s.readHeader()
}

func (s *segmentReader) readHeader() error {
	if s.size < int64(segmentHeaderSize) {
		return &damageError{off: 0, reason: fmt.Sprintf("header cut short at %d bytes", s.size)}
	}
	var h [segmentHeaderSize]byte
	if _, err := io.ReadFull(s.r, h[:]); err != nil {
		return fmt.Errorf("read header of segment %s: %w", s.name, err)
	}
	if string(h[:len(segmentMagic)]) != segmentMagic {
		return &damageError{off: 0, reason: "not a segment header"}
	}
	if v := binary.LittleEndian.Uint32(h[len(segmentMagic):]); v != segmentVersion {
		return fmt.Errorf("segment %s: unsupported format version %d", s.name, v)
	}
	s.off = int64(segmentHeaderSize)
	return nil
}

// nextRecord reads the next record. rec is valid until the next call. It
// returns io.EOF at the clean end of the segment, and a *damageError where
// the valid records end.
func (s *segmentReader) nextRecord() (lsn uint64, rec []byte, err error) {
	remaining := s.size - s.off
	if remaining == 0 {
		return 0, nil, io.EOF
	}
	if remaining < recordHeaderSize {
		return 0, nil, &damageError{off: s.off, reason: fmt.Sprintf("record header cut short at %d bytes", remaining)}
	}
	if _, err := io.ReadFull(s.r, s.hdr[:]); err != nil {
		return 0, nil, fmt.Errorf("read segment %s at offset %d: %w", s.name, s.off, err)
	}
	if s.hdr == ([recordHeaderSize]byte{}) {
		return 0, nil, &damageError{off: s.off, reason: "zeros written ahead of the records", zeros: true}
	}
	length, crc, lsn := decodeRecordHeader(&s.hdr)
	if length > MaxRecordSize {
		return 0, nil, &damageError{off: s.off, reason: fmt.Sprintf("record length %d exceeds the maximum", length)}
	}
	if int64(length) > remaining-recordHeaderSize {
		return 0, nil, &damageError{off: s.off, reason: fmt.Sprintf("record of %d bytes cut short at %d", length, remaining-recordHeaderSize)}
	}
	s.buf = slices.Grow(s.buf[:0], int(length))[:length]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		return 0, nil, fmt.Errorf("read segment %s at offset %d: %w", s.name, s.off, err)
	}
	if recordCRC(&s.hdr, s.buf) != crc {
		return 0, nil, &damageError{off: s.off, reason: fmt.Sprintf("crc mismatch in record of %d bytes", length)}
	}
	if lsn != s.next {
		return 0, nil, &damageError{off: s.off, reason: fmt.Sprintf("record carries lsn %d, want %d", lsn, s.next)}
	}
	s.off += recordHeaderSize + int64(length)
	s.next++
	return lsn, s.buf, nil
}

func (s *segmentReader) Close() error { return s.f.Close() }

// lsnName names a file of the log directory after an lsn: prefix, the lsn
// as 20 decimal digits (so names sort by lsn), suffix.
func lsnName(prefix string, lsn uint64, suffix string) string {
	return fmt.Sprintf("%s%020d%s", prefix, lsn, suffix)
}

// parseLSNName returns the lsn in a name made by lsnName with the same
// prefix and suffix, or ok=false if name is not one.
func parseLSNName(name, prefix, suffix string) (lsn uint64, ok bool) {
	digits, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	lsn, err := strconv.ParseUint(digits, 10, 64)
	return lsn, err == nil
}
