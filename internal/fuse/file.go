package fuse

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata"
)

// File contents go through the SDK's client.File: writes are buffered
// into blocks, uploaded to the object store and committed when the file
// is flushed (each close(2) of a descriptor, fsync(2)) or released; reads
// read ahead and share the client's block cache. The kernel keeps its
// page cache in front of them.

// fileHandle is an open regular file. client.File serializes the calls
// the kernel makes on it from several goroutines.
type fileHandle struct {
	f     *client.File
	ino   client.Ino
	write bool
	flags uint32 // the open(2) flags
	// killed is set when the kernel marks a write as one that must clear
	// set-user-ID and set-group-ID (WRITE_KILL_SUIDGID): the commit of
	// that write clears them on the service, and the kernel's cached
	// attributes must then be dropped.
	killed atomic.Bool
	// held are the chmod, chown and utimes held back until the file's
	// close (deferattr.go); nil where nothing may be held back: handles
	// that did not create their file, and every handle in strict
	// durability.
	held *heldAttrs
}

// openFiles indexes the open files by inode, so that GETATTR counts
// buffered writes, a truncate reaches every handle, and a commit through
// one handle makes the others read again. Shared by the request
// goroutines; guarded by mu.
type openFiles struct {
	mu sync.Mutex
	m  map[client.Ino][]*fileHandle
}

func (w *openFiles) add(h *fileHandle) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = make(map[client.Ino][]*fileHandle)
	}
	w.m[h.ino] = append(w.m[h.ino], h)
}

func (w *openFiles) remove(h *fileHandle) {
	w.mu.Lock()
	defer w.mu.Unlock()
	hs := w.m[h.ino]
	for i, x := range hs {
		if x == h {
			hs = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	if len(hs) == 0 {
		delete(w.m, h.ino)
	} else {
		w.m[h.ino] = hs
	}
}

// inos returns the inodes with open files.
func (w *openFiles) inos() []client.Ino {
	w.mu.Lock()
	defer w.mu.Unlock()
	inos := make([]client.Ino, 0, len(w.m))
	for ino := range w.m {
		inos = append(inos, ino)
	}
	return inos
}

// of returns the files open on ino.
func (w *openFiles) of(ino client.Ino) []*fileHandle {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*fileHandle(nil), w.m[ino]...)
}

// openFlags are the open(2) flags that matter to a file handle.
const openFlags = syscall.O_ACCMODE | syscall.O_TRUNC | syscall.O_APPEND

// openFile opens ino for c's caller and returns the handle to give the
// kernel; O_CREAT in flags says the caller has just created it. The file
// outlives the request, so its calls use a context of their own, bounded
// by the client's operation timeout.
func (fs *FS) openFile(c *client.Client, ino client.Ino, flags uint32) (uint64, error) {
	f, err := c.OpenFileIno(context.Background(), ino, int(flags&(openFlags|syscall.O_CREAT)))
	if err != nil {
		return 0, err
	}
	h := &fileHandle{f: f, ino: ino, write: flags&syscall.O_ACCMODE != syscall.O_RDONLY, flags: flags}
	fs.open.add(h)
	return fs.files.add(h), nil
}

// Open opens a file; the service checks the caller's access.
func (fs *FS) Open(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) (st gofuse.Status) {
	defer fs.observe(opOpen, time.Now(), &st)
	if in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY && fs.readOnly() {
		return gofuse.EROFS
	}
	if st := fs.sendHeld(client.Ino(in.NodeId)); st != gofuse.OK {
		return st
	}
	_, c := fs.asWhole(&in.Caller)
	fh, err := fs.openFile(c, client.Ino(in.NodeId), in.Flags&^syscall.O_CREAT)
	if err != nil {
		return fs.fail(opOpen, err)
	}
	out.Fh = fh
	return gofuse.OK
}

// Create creates a regular file and opens it, in one call to the service
// (CREATE_OPEN), whose reply also carries the directory's attributes for
// the GETATTR the kernel sends next (dirattrs.go).
func (fs *FS) Create(cancel <-chan struct{}, in *gofuse.CreateIn, name string, out *gofuse.CreateOut) (st gofuse.Status) {
	defer fs.observe(opCreate, time.Now(), &st)
	if fs.readOnly() {
		return gofuse.EROFS
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	cred := fs.credOf(&in.Caller)
	c := fs.c.As(cred)
	parent := client.Ino(in.NodeId)
	began := fs.dirAttrs.beginCreate()
	fs.fresh.naming(parent, name)
	// O_CREAT: the creator may open the new file whatever its mode. The
	// file outlives the request: its calls use a context of their own.
	f, fi, dir, err := c.CreateOpenIno(context.Background(), parent, name, in.Mode&0o7777, in.Umask,
		int(in.Flags&(openFlags|syscall.O_CREAT)))
	var dirAttr *client.Attr
	if dir != nil {
		a := dir.Attr()
		dirAttr = &a
	}
	fs.dirAttrs.created(began, parent, dirAttr)
	if errors.Is(err, syscall.EEXIST) && in.Flags&syscall.O_EXCL == 0 {
		// Made by someone else since the kernel's LOOKUP (or, in a
		// fresh directory, before it: fresh.go): open(2) without
		// O_EXCL opens the file that is there.
		return fs.openExisting(c, in, name, out)
	}
	if err != nil {
		return fs.fail(opCreate, err)
	}
	fs.noCaps.add(fi.Ino())
	h := &fileHandle{f: f, ino: fi.Ino(), write: in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY, flags: in.Flags | syscall.O_CREAT}
	if h.write && c.Durability() == client.DurabilityPOSIX {
		h.held = &heldAttrs{cred: cred, attr: fi.Attr()}
	}
	fs.open.add(h)
	fs.fillEntry(&out.EntryOut, fi.Attr())
	out.Fh = fs.files.add(h)
	return gofuse.OK
}

// openExisting answers a CREATE without O_EXCL whose name is taken: a
// regular file there is opened with the request's flags (its mode and
// the caller's rights checked by the service, as for OPEN); a directory
// is EISDIR; anything else, EEXIST.
func (fs *FS) openExisting(c *client.Client, in *gofuse.CreateIn, name string, out *gofuse.CreateOut) gofuse.Status {
	ctx := &gofuse.Context{Caller: in.Caller}
	fi, err := c.Lookup(ctx, client.Ino(in.NodeId), name)
	if err != nil {
		return fs.fail(opCreate, err)
	}
	switch fi.Attr().Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
	case syscall.S_IFDIR:
		return gofuse.EISDIR
	default:
		return gofuse.Status(syscall.EEXIST)
	}
	fh, err := fs.openFile(c, fi.Ino(), in.Flags&^syscall.O_CREAT)
	if err != nil {
		return fs.fail(opCreate, err)
	}
	if in.Flags&syscall.O_TRUNC != 0 {
		// The attributes as the truncation left them.
		if fi, err = c.GetAttr(ctx, fi.Ino()); err != nil {
			fs.Release(nil, &gofuse.ReleaseIn{Fh: fh})
			return fs.fail(opCreate, err)
		}
	}
	fs.fillEntry(&out.EntryOut, fs.withOpen(fi.Attr()))
	out.Fh = fh
	return gofuse.OK
}

// handle returns the open file fh stands for.
func (fs *FS) handle(fh uint64) (*fileHandle, gofuse.Status) {
	h, ok := fs.files.get(fh)
	if !ok {
		return nil, gofuse.EBADF
	}
	return h, gofuse.OK
}

// Read reads up to in.Size bytes at in.Offset; fewer only at the end of
// the file.
func (fs *FS) Read(cancel <-chan struct{}, in *gofuse.ReadIn, buf []byte) (res gofuse.ReadResult, st gofuse.Status) {
	defer fs.observe(opRead, time.Now(), &st)
	h, st := fs.handle(in.Fh)
	if st != gofuse.OK {
		return nil, st
	}
	n, err := h.f.ReadAt(buf[:min(int(in.Size), len(buf))], int64(in.Offset))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fs.fail(opRead, err)
	}
	return gofuse.ReadResultData(buf[:n]), gofuse.OK
}

// Write buffers data at in.Offset (the kernel has already placed an
// O_APPEND write at the end of the file).
func (fs *FS) Write(cancel <-chan struct{}, in *gofuse.WriteIn, data []byte) (written uint32, st gofuse.Status) {
	defer fs.observe(opWrite, time.Now(), &st)
	h, st := fs.handle(in.Fh)
	if st != gofuse.OK {
		return 0, st
	}
	if h.holds() {
		// A write after a held-back chmod or utimes: those go first, so
		// that the write clears set-id bits and stamps the mtime after
		// them, as it would have.
		if err := fs.commitHeld(h); err != nil {
			return 0, fs.fail(opWrite, err)
		}
	}
	n, err := h.f.WriteAt(data, int64(in.Offset))
	if in.WriteFlags&gofuse.WRITE_KILL_SUIDGID != 0 {
		h.killed.Store(true) // after the write is buffered: its commit consumes the mark
	}
	if err != nil {
		return uint32(n), fs.fail(opWrite, err)
	}
	return uint32(n), gofuse.OK
}

// Flush commits buffered writes when a descriptor is closed, so that the
// next open anywhere sees them (close-to-open consistency) and close(2)
// reports a failure to store them.
func (fs *FS) Flush(cancel <-chan struct{}, in *gofuse.FlushIn) (st gofuse.Status) {
	defer fs.observe(opFlush, time.Now(), &st)
	if h, ok := fs.files.get(in.Fh); ok {
		h.stopHolding() // before the send below: nothing is held after it
	}
	st = fs.sync(opFlush, in.Fh, false)
	fs.releaseLocks(client.Ino(in.NodeId), in.LockOwner, false)
	return st
}

// Fsync commits buffered writes; a commit is durable on the service.
func (fs *FS) Fsync(cancel <-chan struct{}, in *gofuse.FsyncIn) (st gofuse.Status) {
	defer fs.observe(opFsync, time.Now(), &st)
	return fs.sync(opFsync, in.Fh, true)
}

// sync commits a handle's buffered writes; durable says whether to wait
// for them to be durable as well (fsync, not close: see the mount's
// --durability).
func (fs *FS) sync(op string, fh uint64, durable bool) gofuse.Status {
	h, st := fs.handle(fh)
	if st != gofuse.OK {
		return st
	}
	if !h.write {
		if durable {
			return fs.syncIno(h.ino) // the file's changes made by path, rename, chmod, ...
		}
		return gofuse.OK
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	_, dirty := h.f.BufferedSize()
	commit := h.f.Commit
	if durable {
		commit = h.f.Sync
	}
	if err := commit(); err != nil {
		if op == opFlush && refusedForGood(err) {
			// close(2) reports it; the data goes, as on a local file
			// system: kept, it would be tried again by the release, or by
			// the next open's truncate, and refuse that (EDQUOT on open).
			h.f.Discard()
		}
		return fs.fail(op, err)
	}
	fs.afterCommit(h)
	if dirty {
		for _, o := range fs.open.of(h.ino) {
			if o != h {
				o.f.Invalidate()
			}
		}
	}
	return gofuse.OK
}

// refusedForGood reports whether a commit failed for a reason trying it
// again would not change: a quota reached, the store full, the file too
// large.
func refusedForGood(err error) bool {
	return errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EFBIG)
}

// Release closes a file once the kernel has no more use for it: the last
// buffered writes are committed and the service may drop an unlinked
// file's data.
func (fs *FS) Release(cancel <-chan struct{}, in *gofuse.ReleaseIn) {
	fs.releasing.Add(1)
	defer fs.releasing.Add(-1)
	start, st := time.Now(), gofuse.OK
	defer fs.observe(opRelease, start, &st)
	h, ok := fs.files.remove(in.Fh)
	if !ok {
		st = gofuse.EBADF
		return
	}
	if in.ReleaseFlags&gofuse.FUSE_RELEASE_FLOCK_UNLOCK != 0 {
		fs.releaseLocks(h.ino, in.LockOwner, true)
	}
	fs.open.remove(h)
	err := fs.commitHeld(h)
	fs.takeHeld(h) // what could not be sent goes with the handle
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		st = fs.fail(opRelease, err)
	}
	fs.afterCommit(h)
}

// afterCommit drops the kernel's attributes of h's file once a write that
// had to clear the set-id bits is committed: the service cleared them in
// that commit, and the kernel would otherwise show (and check against)
// the old mode until its attribute timeout.
func (fs *FS) afterCommit(h *fileHandle) {
	if h.killed.Swap(false) {
		fs.dropAttrs(h.ino)
	}
}

// commitWriters commits the writes buffered by every handle open for
// writing on ino.
func (fs *FS) commitWriters(ino client.Ino) error {
	for _, h := range fs.open.of(ino) {
		if h.write {
			if err := fs.commitHeld(h); err != nil {
				return err
			}
			fs.afterCommit(h)
		}
	}
	return nil
}

// withOpen returns a with the size its open writers will give it and the
// attribute changes they hold back (deferattr.go).
func (fs *FS) withOpen(a client.Attr) client.Attr {
	for _, h := range fs.open.of(a.Ino) {
		if !h.write {
			continue
		}
		if size, dirty := h.f.BufferedSize(); dirty && size > a.Size {
			a.Size = size
		}
		a = h.withHeld(a)
	}
	return a
}

// truncate changes a file's size (with any other attributes asked for)
// as the caller. Writes buffered by open handles are committed first, so
// that none lands past the new end afterwards, and every handle then
// continues from the new length.
func (fs *FS) truncate(ctx context.Context, c *client.Client, ino client.Ino, s client.SetAttr) (*client.FileInfo, error) {
	if err := fs.commitWriters(ino); err != nil {
		return nil, err
	}
	hs := fs.open.of(ino)
	fi, err := c.SetAttrIno(ctx, ino, s)
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		h.f.Resized(s.Size)
	}
	return fi, nil
}

// fallocate(2) modes the mount takes: 0 (make the file at least
// offset+length long) and FALLOC_FL_KEEP_SIZE alone, which changes
// nothing. Canopy stores no blocks ahead of writes, so neither reserves
// space; punching holes, zeroing, collapsing and inserting ranges answer
// EOPNOTSUPP.
const fallocKeepSize = 0x01

// Fallocate makes the file at least in.Offset+in.Length bytes long (never
// shorter) in one commit on the service.
func (fs *FS) Fallocate(cancel <-chan struct{}, in *gofuse.FallocateIn) (st gofuse.Status) {
	defer fs.observe(opFallocate, time.Now(), &st)
	h, st := fs.handle(in.Fh)
	if st != gofuse.OK {
		return st
	}
	if in.Mode&^fallocKeepSize != 0 {
		return gofuse.Status(syscall.EOPNOTSUPP)
	}
	if !h.write {
		return gofuse.EBADF
	}
	end := in.Offset + in.Length
	if in.Length == 0 || end < in.Offset || end > client.LockEOF {
		return gofuse.EINVAL
	}
	if in.Mode&fallocKeepSize != 0 {
		return gofuse.OK
	}
	if fs.readOnly() {
		return gofuse.EROFS
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := fs.asWhole(&in.Caller)
	if _, err := clientdata.Meta(c).Commit(ctx, uint64(h.ino), nil, end); err != nil {
		return fs.fail(opFallocate, err)
	}
	for _, o := range fs.open.of(h.ino) {
		o.f.Invalidate() // reads past the old end now see zeros
	}
	return gofuse.OK
}
