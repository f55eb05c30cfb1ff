package client

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"syscall"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/data"
)

// File is an open file (or directory) of Canopy, like *os.File. Writes are
// buffered and coalesced into blocks, uploaded in the background and
// committed by Sync and Close: once Close returns, every client sees the
// data. Reads read ahead while access is sequential and share the client's
// block cache. A File is safe for concurrent use; calls are serialized.
//
// A File uses the context it was opened with for all its calls.
type File struct {
	c    *Client
	ctx  context.Context
	name string
	ino  Ino
	flag int
	dir  bool
	info *FileInfo // the attributes OPEN returned

	mu     sync.Mutex // guards everything below and serializes calls
	closed bool
	off    int64
	w      *data.Writer // nil unless opened for writing
	r      *data.Reader // nil for directories
	dirent []*DirEntry  // ReadDir: entries read but not returned
	cursor string
	eof    bool
}

var (
	_ io.ReadWriteSeeker = (*File)(nil)
	_ io.ReaderAt        = (*File)(nil)
	_ io.WriterAt        = (*File)(nil)
	_ fs.ReadDirFile     = (*File)(nil)
)

// Open opens the file or directory name for reading.
func (c *Client) Open(ctx context.Context, name string) (*File, error) {
	return c.OpenFile(ctx, name, os.O_RDONLY, 0)
}

// OpenFile opens name with os.OpenFile's flags (O_RDONLY, O_WRONLY,
// O_RDWR, O_CREATE, O_EXCL, O_TRUNC, O_APPEND), creating it with
// permission bits perm if asked.
func (c *Client) OpenFile(ctx context.Context, name string, flag int, perm fs.FileMode) (*File, error) {
	writing := flag&(os.O_WRONLY|os.O_RDWR) != 0
	oflags := uint32(flag & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC))
	var fi *FileInfo
	var err error
	if flag&os.O_CREATE != 0 {
		created, err := c.Create(ctx, name, uint32(perm.Perm()))
		switch {
		case err == nil:
			// As open(2) with O_CREAT: the creator's open is granted
			// whatever the new file's mode.
			fi, err = c.OpenIno(ctx, created.Ino(), oflags|uint32(os.O_CREATE))
		case flag&os.O_EXCL == 0 && errors.Is(err, syscall.EEXIST):
			fi, err = c.openPath(ctx, name, oflags)
		}
		if err != nil {
			return nil, err
		}
	} else if fi, err = c.openPath(ctx, name, oflags); err != nil {
		return nil, err
	}
	// From here on the server counts this open: every failure closes it.
	f := &File{c: c, ctx: ctx, name: name, ino: fi.Ino(), flag: flag, dir: fi.IsDir(), info: fi}
	fail := func(err error) (*File, error) {
		c.CloseIno(ctx, f.ino)
		return nil, renamed(err, "open", name)
	}
	if f.dir {
		return f, nil
	}
	if !fi.Mode().IsRegular() {
		return fail(syscall.EINVAL)
	}
	vol, err := c.dataVolume(ctx)
	if err != nil {
		return fail(err)
	}
	if flag&os.O_TRUNC != 0 && fi.Size() > 0 {
		if fi, err = c.SetAttrIno(ctx, f.ino, SetAttr{Valid: SetSize}); err != nil {
			return fail(err)
		}
		f.info = fi
	}
	f.r = vol.NewReader((*dataPath)(c), uint64(f.ino))
	if writing {
		f.w = vol.NewWriter((*dataPath)(c), uint64(f.ino), uint64(fi.Size()))
	}
	return f, nil
}

// openPath sends OPEN for the node at p (following symlinks).
func (c *Client) openPath(ctx context.Context, p string, flags uint32) (*FileInfo, error) {
	var r pb.AttrReply
	if err := c.call(ctx, pb.Method_OPEN, &pb.OpenRequest{Path: p, Flags: flags}, &r, "open", p); err != nil {
		return nil, err
	}
	if ino := Ino(r.Attr.GetIno()); ino != 0 {
		c.locks.held(c, ino)
	}
	return newFileInfo(path.Base(p), r.Attr), nil
}

// renamed gives err, a *PathError of the client, the caller's op and path.
func renamed(err error, op, name string) error {
	return &pathError{Op: op, Path: name, Err: errnoOf(err)}
}

// Name is the name the file was opened with.
func (f *File) Name() string { return f.name }

// Ino is the file's inode number.
func (f *File) Ino() Ino { return f.ino }

// check returns the error of a call on a closed file or one not opened for
// the call (write without a writer).
func (f *File) check(op string, write bool) error {
	switch {
	case f.closed:
		return &pathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	case f.dir && op != "readdir" && op != "stat" && op != "close":
		return &pathError{Op: op, Path: f.name, Err: syscall.EISDIR}
	case write && f.w == nil:
		return &pathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

// fail wraps an error of op on the file.
func (f *File) fail(op string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &pathError{Op: op, Path: f.name, Err: pe.Err}
	}
	return &pathError{Op: op, Path: f.name, Err: err}
}

// flushLocked commits buffered writes so that reads see them.
func (f *File) flushLocked() error { return f.flushWith(f.ctx) }

// flushWith is flushLocked with the calls made in ctx.
func (f *File) flushWith(ctx context.Context) error {
	if f.w == nil || !f.w.Dirty() {
		return nil
	}
	err := f.w.Flush(ctx)
	f.r.Invalidate()
	return err
}

// Read reads up to len(p) bytes at the file offset and advances it.
func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	n, err := f.readAtLocked(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// ReadAt reads len(p) bytes at off; fewer only at the end of the file,
// with io.EOF.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &pathError{Op: "read", Path: f.name, Err: syscall.EINVAL}
	}
	return f.readAtLocked(p, off)
}

func (f *File) readAtLocked(p []byte, off int64) (int, error) {
	if err := f.flushLocked(); err != nil {
		return 0, f.fail("read", err)
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, eof, err := f.r.ReadAt(f.ctx, p, off)
	if err != nil {
		return n, f.fail("read", err)
	}
	if eof {
		return n, io.EOF
	}
	return n, nil
}

// Write writes p at the file offset (at the end with O_APPEND) and
// advances it.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.flag&os.O_APPEND != 0 {
		f.off = int64(f.w.Size())
	}
	n, err := f.writeAtLocked(p, f.off)
	f.off += int64(n)
	return n, err
}

// WriteAt writes p at off.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &pathError{Op: "write", Path: f.name, Err: syscall.EINVAL}
	}
	return f.writeAtLocked(p, off)
}

func (f *File) writeAtLocked(p []byte, off int64) (int, error) {
	if err := f.w.WriteAt(f.ctx, p, off); err != nil {
		return 0, f.fail("write", err)
	}
	return len(p), nil
}

// Seek sets the offset of the next Read or Write.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("seek", false); err != nil {
		return 0, err
	}
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		size, err := f.sizeLocked()
		if err != nil {
			return 0, f.fail("seek", err)
		}
		offset += size
	default:
		return 0, &pathError{Op: "seek", Path: f.name, Err: syscall.EINVAL}
	}
	if offset < 0 {
		return 0, &pathError{Op: "seek", Path: f.name, Err: syscall.EINVAL}
	}
	f.off = offset
	return offset, nil
}

// sizeLocked is the file's length including buffered writes.
func (f *File) sizeLocked() (int64, error) {
	fi, err := f.c.GetAttr(f.ctx, f.ino)
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if f.w != nil && f.w.Dirty() {
		size = max(size, int64(f.w.Size()))
	}
	return size, nil
}

// Truncate changes the file's length; bytes past the old end read as
// zeros.
func (f *File) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return &pathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	if err := f.flushLocked(); err != nil {
		return f.fail("truncate", err)
	}
	_, err := f.c.SetAttrIno(f.ctx, f.ino, SetAttr{Valid: SetSize, Size: uint64(size)})
	f.r.Invalidate()
	if err != nil {
		return f.fail("truncate", err)
	}
	f.w.SetSize(uint64(size))
	return nil
}

// Sync uploads and commits buffered writes: afterwards every client sees
// them.
func (f *File) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	if f.c.unsynced != nil && f.w != nil && f.w.Dirty() {
		// DurabilityPOSIX with writes to commit: their commit is answered
		// once durable, and with it every change before it in the
		// partition's log, so no SYNC is needed after it.
		if err := f.flushWith(withDurable(f.ctx)); err != nil {
			return f.fail("sync", err)
		}
		return nil
	}
	if err := f.flushLocked(); err != nil {
		return f.fail("sync", err)
	}
	if err := f.c.syncFile(f.ctx, f.ino, f.name); err != nil {
		return f.fail("sync", err)
	}
	return nil
}

// OpenInfo returns the file's attributes as they were when it was
// opened (OPEN returns them), without a call: what Stat would have
// returned just before the open.
func (f *File) OpenInfo() *FileInfo { return f.info }

// Stat returns the file's attributes; its size includes buffered writes.
func (f *File) Stat() (fs.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	fi, err := f.c.GetAttr(f.ctx, f.ino)
	if err != nil {
		return nil, f.fail("stat", err)
	}
	fi.name = path.Base(f.name)
	if f.w != nil && f.w.Dirty() {
		fi.attr.Size = max(fi.attr.Size, f.w.Size())
	}
	return fi, nil
}

// Close commits buffered writes and releases the file. Once it returns
// without error, every client sees what was written.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("close", false); err != nil {
		return err
	}
	f.closed = true
	if f.dir {
		if err := f.c.CloseIno(f.ctx, f.ino); err != nil {
			return f.fail("close", err)
		}
		return nil
	}
	defer f.r.Release()
	err := f.flushLocked()
	if err != nil && f.w != nil {
		f.w.Abort()
	}
	if cerr := f.c.CloseIno(f.ctx, f.ino); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return f.fail("close", err)
	}
	return nil
}

// ReadDir reads the directory's entries, in name order, as
// fs.ReadDirFile: n > 0 returns at most n (io.EOF at the end), n <= 0
// returns all that are left.
func (f *File) ReadDir(n int) ([]fs.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("readdir", false); err != nil {
		return nil, err
	}
	if !f.dir {
		return nil, &pathError{Op: "readdir", Path: f.name, Err: syscall.ENOTDIR}
	}
	var out []fs.DirEntry
	for n <= 0 || len(out) < n {
		if len(f.dirent) == 0 {
			if f.eof {
				break
			}
			page, next, eof, err := f.c.ReadDirIno(f.ctx, f.ino, f.cursor, 0, true)
			if err != nil {
				return out, f.fail("readdir", err)
			}
			f.dirent, f.cursor, f.eof = page, next, eof || len(page) == 0
			continue
		}
		out = append(out, f.dirent[0])
		f.dirent = f.dirent[1:]
	}
	if n > 0 && len(out) == 0 {
		return nil, io.EOF
	}
	if out == nil {
		out = []fs.DirEntry{}
	}
	return out, nil
}
