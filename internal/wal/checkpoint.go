package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/canopyfs/canopy/internal/vfs"
)

// A checkpoint file is a header, the body, and a trailer:
//
//	magic "canopyck" | version uint32 | lsn uint64 | body | crc uint32
//
// Integers are little-endian; crc is the CRC-32C of the header and body.
const (
	checkpointMagic       = "canopyck"
	checkpointVersion     = 1
	checkpointHeaderSize  = len(checkpointMagic) + 4 + 8
	checkpointTrailerSize = 4

	checkpointPrefix     = "checkpoint-"
	checkpointSuffix     = ".ckpt"
	checkpointTempSuffix = ".tmp"

	// checkpointsKept is how many checkpoints WriteCheckpoint leaves: the
	// newest, and one to fall back to should the newest be damaged.
	checkpointsKept = 2
)

// checkpointName returns the file name of the checkpoint taken at lsn.
func checkpointName(lsn uint64) string { return lsnName(checkpointPrefix, lsn, checkpointSuffix) }

// parseCheckpointName returns the lsn of the checkpoint file named name, or
// ok=false if name is not a checkpoint's.
func parseCheckpointName(name string) (lsn uint64, ok bool) {
	return parseLSNName(name, checkpointPrefix, checkpointSuffix)
}

// WriteCheckpoint writes a checkpoint taken at lsn into dir, creating dir if
// needed. fn writes the checkpoint's body to w. The checkpoint is written
// under a temporary name, synced, renamed to checkpoint-<lsn>.ckpt and its
// directory synced, so a crash leaves either the whole checkpoint or none.
// Then all but the newest two checkpoints in dir are removed, along with
// temporary files left by failed writes; failures to remove them are logged
// at Warn, not returned, since the new checkpoint is durable by then.
//
// If fn returns an error, WriteCheckpoint removes the temporary file and
// returns the error wrapped. WriteCheckpoint must not run concurrently with
// another WriteCheckpoint or an OpenCheckpoint on the same dir; it may share
// dir with a Log, and run while another goroutine uses that Log.
func WriteCheckpoint(fsys vfs.FS, dir string, lsn uint64, fn func(w io.Writer) error) error {
	name := checkpointName(lsn)
	if err := ensureDir(fsys, dir); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", name, err)
	}
	path := filepath.Join(dir, name)
	tmp := path + checkpointTempSuffix
	if err := writeCheckpointFile(fsys, tmp, lsn, fn); err != nil {
		fsys.Remove(tmp) // best effort: the next WriteCheckpoint removes leftovers
		return fmt.Errorf("write checkpoint %s: %w", path, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename checkpoint %s: %w", path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync checkpoint dir %s: %w", dir, err)
	}
	removeOldCheckpoints(fsys, dir)
	return nil
}

// writeCheckpointFile writes and syncs the checkpoint file at path.
func writeCheckpointFile(fsys vfs.FS, path string, lsn uint64, fn func(w io.Writer) error) error {
	f, err := fsys.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	bw := bufio.NewWriterSize(f, bufferSize)
	cw := &crcWriter{w: bw}

	var hdr [checkpointHeaderSize]byte
	magicEnd := copy(hdr[:], checkpointMagic)
	binary.LittleEndian.PutUint32(hdr[magicEnd:], checkpointVersion)
	binary.LittleEndian.PutUint64(hdr[magicEnd+4:], lsn)
	if _, err := cw.Write(hdr[:]); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	if err := fn(cw); err != nil {
		return err
	}
	var trailer [checkpointTrailerSize]byte
	binary.LittleEndian.PutUint32(trailer[:], cw.crc)
	if _, err := bw.Write(trailer[:]); err != nil {
		return fmt.Errorf("write trailer: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	err = f.Close()
	f = nil
	if err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// crcWriter passes writes on to w, keeping the CRC-32C of what it passed.
type crcWriter struct {
	w   io.Writer
	crc uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, crcTable, p[:n])
	return n, err
}

// checkpointFile is a checkpoint found in a directory.
type checkpointFile struct {
	lsn  uint64
	name string
}

// listCheckpoints returns the checkpoints in dir, newest first, and the
// temporary files that failed writes left there. A missing dir holds none.
func listCheckpoints(fsys vfs.FS, dir string) (ckpts []checkpointFile, temps []string, err error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list checkpoint dir %s: %w", dir, err)
	}
	for _, name := range names {
		if lsn, ok := parseCheckpointName(name); ok {
			ckpts = append(ckpts, checkpointFile{lsn: lsn, name: name})
		} else if base, ok := strings.CutSuffix(name, checkpointTempSuffix); ok {
			if _, ok := parseCheckpointName(base); ok {
				temps = append(temps, name)
			}
		}
	}
	slices.SortFunc(ckpts, func(a, b checkpointFile) int {
		switch {
		case a.lsn > b.lsn:
			return -1
		case a.lsn < b.lsn:
			return 1
		}
		return 0
	})
	return ckpts, temps, nil
}

// Checkpoint is one checkpoint file of a directory: the LSN of the last
// record it covers, and its file name.
type Checkpoint struct {
	LSN  uint64
	Name string
}

// Checkpoints lists the checkpoints in dir, oldest first, by their names
// alone (OpenCheckpoint verifies one). Files of writes in progress or
// failed are not listed; a missing dir holds none.
func Checkpoints(fsys vfs.FS, dir string) ([]Checkpoint, error) {
	ckpts, _, err := listCheckpoints(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := make([]Checkpoint, len(ckpts))
	for i, c := range ckpts {
		out[len(ckpts)-1-i] = Checkpoint{LSN: c.lsn, Name: c.name}
	}
	return out, nil
}

// removeOldCheckpoints removes all but the newest checkpointsKept
// checkpoints in dir, and any temporary files.
func removeOldCheckpoints(fsys vfs.FS, dir string) {
	ckpts, temps, err := listCheckpoints(fsys, dir)
	if err != nil {
		slog.Default().Warn("wal: cannot list old checkpoints", "dir", dir, "err", err)
		return
	}
	var doomed []string
	for _, c := range ckpts[min(len(ckpts), checkpointsKept):] {
		doomed = append(doomed, c.name)
	}
	doomed = append(doomed, temps...)
	if len(doomed) == 0 {
		return
	}
	for _, name := range doomed {
		if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
			slog.Default().Warn("wal: cannot remove old checkpoint file", "dir", dir, "file", name, "err", err)
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		slog.Default().Warn("wal: cannot sync checkpoint dir", "dir", dir, "err", err)
	}
}

// OpenCheckpoint opens the newest valid checkpoint in dir and returns the
// lsn it was taken at and a reader of its body. Before returning a
// checkpoint it reads it through once to verify its checksum; a damaged
// checkpoint is skipped, with a Warn, in favour of the next older one. The
// body reader checks the checksum again as it reaches the end, and returns
// an error wrapping ErrCorrupt rather than io.EOF should it no longer
// match. ok is false if dir holds no valid checkpoint.
func OpenCheckpoint(fsys vfs.FS, dir string) (lsn uint64, body io.ReadCloser, ok bool, err error) {
	ckpts, _, err := listCheckpoints(fsys, dir)
	if err != nil {
		return 0, nil, false, err
	}
	for _, c := range ckpts {
		path := filepath.Join(dir, c.name)
		err := verifyCheckpoint(fsys, path, c.lsn)
		if errors.Is(err, ErrCorrupt) {
			slog.Default().Warn("wal: skipping damaged checkpoint", "path", path, "err", err)
			continue
		}
		if err != nil {
			return 0, nil, false, err
		}
		r, err := openCheckpointFile(fsys, path, c.lsn)
		if err != nil {
			return 0, nil, false, err
		}
		return c.lsn, r, true, nil
	}
	return 0, nil, false, nil
}

// verifyCheckpoint reads the checkpoint at path through and checks it.
func verifyCheckpoint(fsys vfs.FS, path string, lsn uint64) error {
	r, err := openCheckpointFile(fsys, path, lsn)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}

// checkpointReader reads the body of a checkpoint file, checking the
// checksum when it reaches the end.
type checkpointReader struct {
	path      string
	f         vfs.File
	r         *bufio.Reader
	remaining int64  // body bytes not yet read
	crc       uint32 // of the header and the body read so far
	end       error  // what Read returns once the body is exhausted, when known
}

// openCheckpointFile opens the checkpoint at path, taken at lsn according
// to its name, and checks its header.
func openCheckpointFile(fsys vfs.FS, path string, lsn uint64) (*checkpointReader, error) {
	size, err := fsys.Size(path)
	if err != nil {
		return nil, fmt.Errorf("stat checkpoint %s: %w", path, err)
	}
	if size < int64(checkpointHeaderSize+checkpointTrailerSize) {
		return nil, fmt.Errorf("checkpoint %s: only %d bytes: %w", path, size, ErrCorrupt)
	}
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint %s: %w", path, err)
	}
	r := bufio.NewReaderSize(f, bufferSize)
	var hdr [checkpointHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	var bad error
	switch magicEnd := len(checkpointMagic); {
	case string(hdr[:magicEnd]) != checkpointMagic:
		bad = fmt.Errorf("checkpoint %s: not a checkpoint header: %w", path, ErrCorrupt)
	case binary.LittleEndian.Uint32(hdr[magicEnd:]) != checkpointVersion:
		bad = fmt.Errorf("checkpoint %s: unsupported format version %d", path, binary.LittleEndian.Uint32(hdr[magicEnd:]))
	case binary.LittleEndian.Uint64(hdr[magicEnd+4:]) != lsn:
		bad = fmt.Errorf("checkpoint %s: header says lsn %d: %w", path, binary.LittleEndian.Uint64(hdr[magicEnd+4:]), ErrCorrupt)
	}
	if bad != nil {
		f.Close()
		return nil, bad
	}
	return &checkpointReader{
		path:      path,
		f:         f,
		r:         r,
		remaining: size - int64(checkpointHeaderSize+checkpointTrailerSize),
		crc:       crc32.Update(0, crcTable, hdr[:]),
	}, nil
}

func (c *checkpointReader) Read(p []byte) (int, error) {
	if c.remaining == 0 {
		return 0, c.finish()
	}
	if int64(len(p)) > c.remaining {
		p = p[:c.remaining]
	}
	n, err := c.r.Read(p)
	c.crc = crc32.Update(c.crc, crcTable, p[:n])
	c.remaining -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the file is shorter than it was
	}
	if err != nil {
		return n, fmt.Errorf("read checkpoint %s: %w", c.path, err)
	}
	return n, nil
}

// finish reads the trailer and returns io.EOF if the checksum matches.
func (c *checkpointReader) finish() error {
	if c.end != nil {
		return c.end
	}
	var trailer [checkpointTrailerSize]byte
	if _, err := io.ReadFull(c.r, trailer[:]); err != nil {
		return fmt.Errorf("read checkpoint %s: %w", c.path, err)
	}
	if want := binary.LittleEndian.Uint32(trailer[:]); want != c.crc {
		c.end = fmt.Errorf("checkpoint %s: checksum %08x, want %08x: %w", c.path, c.crc, want, ErrCorrupt)
	} else {
		c.end = io.EOF
	}
	return c.end
}

func (c *checkpointReader) Close() error { return c.f.Close() }
