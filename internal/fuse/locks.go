package fuse

import (
	"context"
	"sync"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// File locks go to the metadata service (client.SetLk and friends), so
// that every mount of the same Canopy sees them. The kernel's lock owner
// (a process's file table for fcntl locks, an open file for flock) is the
// owner within this mount's client session. The kernel does not send an
// unlock when a file is closed: a POSIX lock owner's locks on a file go
// at FLUSH (any close(2) of it by that owner), a flock at RELEASE (the
// last close of the open file), as fcntl(2) and flock(2) say.

// heldLocks remembers which owners may hold locks on which inodes, so
// that FLUSH and RELEASE ask the service to release only where there may
// be something to release. Shared by the request goroutines; guarded by mu.
type heldLocks struct {
	mu sync.Mutex
	m  map[heldKey]struct{}
}

type heldKey struct {
	ino   client.Ino
	owner uint64
	flock bool
}

func (h *heldLocks) add(k heldKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[heldKey]struct{})
	}
	h.m[k] = struct{}{}
}

// take forgets k and reports whether it was there.
func (h *heldLocks) take(k heldKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.m[k]
	delete(h.m, k)
	return ok
}

// lockOf converts the kernel's lock to the SDK's.
func lockOf(lk *gofuse.FileLock) client.Lock {
	return client.Lock{Type: client.LockType(lk.Typ), Start: lk.Start, End: min(lk.End, client.LockEOF), Pid: lk.Pid}
}

// GetLk reports the first lock of another owner, on any mount, that
// conflicts with the one described (type F_UNLCK if none).
func (fs *FS) GetLk(cancel <-chan struct{}, in *gofuse.LkIn, out *gofuse.LkOut) (st gofuse.Status) {
	defer fs.observe(opGetlk, time.Now(), &st)
	ctx := &gofuse.Context{Caller: in.Caller, Cancel: cancel}
	l, err := fs.c.GetLk(ctx, client.Ino(in.NodeId), in.Owner, lockOf(&in.Lk))
	if err != nil {
		return fs.fail(opGetlk, err)
	}
	out.Lk = gofuse.FileLock{Typ: uint32(l.Type), Start: l.Start, End: l.End, Pid: l.Pid}
	if l.Type == client.Unlock {
		out.Lk = gofuse.FileLock{Typ: syscall.F_UNLCK}
	}
	return gofuse.OK
}

// SetLk takes, changes or releases a lock at once (EAGAIN on a conflict).
func (fs *FS) SetLk(cancel <-chan struct{}, in *gofuse.LkIn) (st gofuse.Status) {
	defer fs.observe(opSetlk, time.Now(), &st)
	return fs.setLock(opSetlk, nil, in)
}

// SetLkw is SetLk that waits for the lock; a signal to the caller ends
// the wait with EINTR.
func (fs *FS) SetLkw(cancel <-chan struct{}, in *gofuse.LkIn) (st gofuse.Status) {
	defer fs.observe(opSetlkw, time.Now(), &st)
	return fs.setLock(opSetlkw, cancel, in)
}

// setLock makes a SETLK (cancel nil) or SETLKW call.
func (fs *FS) setLock(op string, cancel <-chan struct{}, in *gofuse.LkIn) gofuse.Status {
	ino := client.Ino(in.NodeId)
	// File and directory handles are numbered apart: the node tells
	// which one the kernel means. A directory is open for reading.
	mode := uint32(syscall.O_RDONLY)
	if h, ok := fs.files.get(in.Fh); ok && h.ino == ino {
		mode = h.flags & syscall.O_ACCMODE
	} else if d, ok := fs.dirs.get(in.Fh); !ok || d.ino != ino {
		return gofuse.EBADF
	}
	lk := lockOf(&in.Lk)
	flock := in.LkFlags&gofuse.LK_FLOCK != 0
	if !flock {
		// fcntl(2): a read lock needs the file open for reading, a
		// write lock for writing.
		switch {
		case lk.Type == client.ReadLock && mode == syscall.O_WRONLY,
			lk.Type == client.WriteLock && mode == syscall.O_RDONLY:
			return gofuse.EBADF
		}
	}
	ctx := context.Background()
	if cancel != nil {
		ctx = &gofuse.Context{Caller: in.Caller, Cancel: cancel}
	}
	var err error
	switch {
	case flock:
		err = fs.c.Flock(ctx, ino, in.Owner, lk.Type, cancel != nil)
	case cancel != nil:
		err = fs.c.SetLkw(ctx, ino, in.Owner, lk)
	default:
		err = fs.c.SetLk(ctx, ino, in.Owner, lk)
	}
	if err != nil {
		return fs.fail(op, err)
	}
	if lk.Type != client.Unlock {
		fs.locks.add(heldKey{ino: ino, owner: in.Owner, flock: flock})
	}
	return gofuse.OK
}

// releaseLocks drops owner's locks of one kind on ino, if it may hold
// any: POSIX locks at FLUSH, a flock at RELEASE.
func (fs *FS) releaseLocks(ino client.Ino, owner uint64, flock bool) {
	if !fs.locks.take(heldKey{ino: ino, owner: owner, flock: flock}) {
		return
	}
	var err error
	if flock {
		err = fs.c.Flock(context.Background(), ino, owner, client.Unlock, false)
	} else {
		err = fs.c.SetLk(context.Background(), ino, owner, client.Lock{Type: client.Unlock, End: client.LockEOF})
	}
	if err != nil {
		// The service drops them anyway when this client goes or falls
		// silent.
		fs.log.Warn("release file locks at close", "ino", ino, "flock", flock, "err", err)
	}
}
