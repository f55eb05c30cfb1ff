package client

import (
	"context"
	"os"
	"syscall"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// The file calls a FUSE layer needs: it knows files by inode number and
// asks for the size a file will have once its buffered writes land.

// OpenFileIno opens regular file ino with open(2) flags (O_RDONLY,
// O_WRONLY or O_RDWR; O_TRUNC empties it; O_APPEND makes Write append;
// O_CREATE says the caller has just created it, so that its owner may
// open it whatever its mode, as open(2) with O_CREAT).
// The service checks the caller's access (OPEN) and keeps the file's data
// until Close even if its last link is removed. ctx serves all the file's
// calls.
func (c *Client) OpenFileIno(ctx context.Context, ino Ino, flag int) (*File, error) {
	name := inoName(ino)
	vol, err := c.dataVolume(ctx)
	if err != nil {
		return nil, &pathError{Op: "open", Path: name, Err: err}
	}
	fi, err := c.OpenIno(ctx, ino, uint32(flag&(os.O_WRONLY|os.O_RDWR|os.O_TRUNC|os.O_CREATE)))
	if err != nil {
		return nil, err
	}
	fail := func(errno syscall.Errno) (*File, error) {
		c.CloseIno(ctx, ino)
		return nil, &pathError{Op: "open", Path: name, Err: errno}
	}
	switch {
	case fi.IsDir():
		return fail(syscall.EISDIR)
	case !fi.Mode().IsRegular():
		return fail(syscall.EINVAL)
	}
	if flag&os.O_TRUNC != 0 && fi.Size() > 0 {
		if fi, err = c.SetAttrIno(ctx, ino, SetAttr{Valid: SetSize}); err != nil {
			c.CloseIno(ctx, ino)
			return nil, err
		}
	}
	f := &File{c: c, ctx: ctx, name: name, ino: ino, flag: flag}
	f.r = vol.NewReader((*dataPath)(c), uint64(ino))
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		f.w = vol.NewWriter((*dataPath)(c), uint64(ino), uint64(fi.Size()))
	}
	return f, nil
}

// BufferedSize returns the file's length counting writes not yet
// committed, and whether there are any.
func (f *File) BufferedSize() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.w == nil || !f.w.Dirty() {
		return 0, false
	}
	return f.w.Size(), true
}

// WriterSize returns the file's length as its writer knows it, buffered
// writes included, whether or not they are committed; false for a file
// not open for writing, or closed.
func (f *File) WriterSize() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.w == nil {
		return 0, false
	}
	return f.w.Size(), true
}

// Invalidate drops what the file has read of the contents, after another
// handle changed them.
func (f *File) Invalidate() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.r != nil {
		f.r.Invalidate()
	}
}

// Discard drops the file's buffered writes without committing them: what
// a commit refused for good (a quota, a full store) is not tried again by
// the next commit or the close, as a local file system keeps no data a
// close(2) reported it could not store.
func (f *File) Discard() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.w != nil {
		f.w.Abort()
	}
	if f.r != nil {
		f.r.Invalidate()
	}
}

// Resized tells the file its length was set to size elsewhere (a
// truncate): it drops what it has read, and its writes continue from the
// new length. Its own buffered writes must have been committed first
// (Sync).
func (f *File) Resized(size uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.r != nil {
		f.r.Invalidate()
	}
	if f.w != nil {
		f.w.SetSize(size)
	}
}

// CommitSetAttr commits the file's buffered writes, as Commit does, and
// applies s (mode, owner and times; not the size) in the same change on
// the service, one call where a commit and a SetAttrIno would take two;
// a service that cannot take them together gets the SetAttrIno after the
// commit. A mount holds back a new file's chmod, chown and utimes until
// its close and sends them this way.
func (f *File) CommitSetAttr(s SetAttr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("commit", true); err != nil {
		return err
	}
	applied, err := f.w.FlushSetAttr(f.ctx, &pb.SetattrRequest{
		Ino: uint64(f.ino), Valid: s.Valid, Mode: s.Mode, Uid: s.UID, Gid: s.GID,
		AtimeNs: s.Atime, MtimeNs: s.Mtime,
	})
	f.r.Invalidate()
	if err != nil {
		return f.fail("commit", err)
	}
	if !applied {
		if _, err := f.c.SetAttrIno(f.ctx, f.ino, s); err != nil {
			return err
		}
	}
	return nil
}
