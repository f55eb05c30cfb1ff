package fuse

import (
	"errors"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// The calls that change directories. The mount asks the kernel to leave
// the caller's umask to it (FUSE_DONT_MASK, with FUSE_POSIX_ACL): the
// service applies it unless the parent has a default ACL, which masks the
// mode instead.

// Mknod creates a regular file, fifo, socket or device node.
func (fs *FS) Mknod(cancel <-chan struct{}, in *gofuse.MknodIn, name string, out *gofuse.EntryOut) (st gofuse.Status) {
	defer fs.observe(opMknod, time.Now(), &st)
	defer fs.changing()()
	if fs.readOnly() {
		return gofuse.EROFS
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := fs.asWhole(&in.Caller)
	fs.fresh.naming(client.Ino(in.NodeId), name)
	fi, err := c.MknodAtMasked(ctx, client.Ino(in.NodeId), name, in.Mode, in.Rdev, in.Umask)
	if err != nil {
		return fs.fail(opMknod, err)
	}
	if in.Mode&syscall.S_IFMT == syscall.S_IFREG {
		fs.noCaps.add(fi.Ino())
	}
	fs.fillEntry(out, fi.Attr())
	return gofuse.OK
}

// Mkdir creates a directory.
func (fs *FS) Mkdir(cancel <-chan struct{}, in *gofuse.MkdirIn, name string, out *gofuse.EntryOut) (st gofuse.Status) {
	defer fs.observe(opMkdir, time.Now(), &st)
	defer fs.changing()()
	if fs.readOnly() {
		return gofuse.EROFS
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := fs.asWhole(&in.Caller)
	fs.fresh.naming(client.Ino(in.NodeId), name)
	fi, err := c.MkdirAtMasked(ctx, client.Ino(in.NodeId), name, in.Mode&0o7777, in.Umask)
	if err != nil {
		return fs.fail(opMkdir, err)
	}
	fs.fresh.made(fi.Ino())
	fs.fillEntry(out, fi.Attr())
	return gofuse.OK
}

// Unlink removes a non-directory entry.
func (fs *FS) Unlink(cancel <-chan struct{}, h *gofuse.InHeader, name string) (st gofuse.Status) {
	defer fs.observe(opUnlink, time.Now(), &st)
	defer fs.changing()()
	if fs.readOnly() {
		return gofuse.EROFS
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := fs.asWhole(&h.Caller)
	if err := c.UnlinkAt(ctx, client.Ino(h.NodeId), name); err != nil {
		return fs.fail(opUnlink, err)
	}
	return gofuse.OK
}

// Rmdir removes an empty directory.
func (fs *FS) Rmdir(cancel <-chan struct{}, h *gofuse.InHeader, name string) (st gofuse.Status) {
	defer fs.observe(opRmdir, time.Now(), &st)
	defer fs.changing()()
	if fs.readOnly() {
		return gofuse.EROFS
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := fs.asWhole(&h.Caller)
	if err := c.RmdirAt(ctx, client.Ino(h.NodeId), name); err != nil {
		return fs.fail(opRmdir, err)
	}
	return gofuse.OK
}

// renameFlags are the renameat2 flags the service knows.
const renameFlags = client.RenameNoReplace | client.RenameExchange

// Rename moves an entry, with renameat2's RENAME_NOREPLACE and
// RENAME_EXCHANGE; other flags (RENAME_WHITEOUT) are EINVAL.
func (fs *FS) Rename(cancel <-chan struct{}, in *gofuse.RenameIn, oldName, newName string) (st gofuse.Status) {
	defer fs.observe(opRename, time.Now(), &st)
	defer fs.changing()()
	if in.Flags&^renameFlags != 0 {
		return gofuse.EINVAL
	}
	if fs.readOnly() {
		return gofuse.EROFS
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := fs.asWhole(&in.Caller)
	fs.fresh.naming(client.Ino(in.Newdir), newName)
	if in.Flags&client.RenameExchange != 0 {
		fs.fresh.naming(client.Ino(in.NodeId), oldName)
	}
	err := c.RenameAt(ctx, client.Ino(in.NodeId), oldName, client.Ino(in.Newdir), newName, in.Flags)
	for _, pause := range renameBusyPauses {
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		// A rename between partitions refuses a file that is open, and
		// the kernel sends the release of a file closed just before
		// after close(2) returned: give this mount's releases time to
		// reach the service, and try again.
		fs.awaitReleases(pause)
		err = c.RenameAt(ctx, client.Ino(in.NodeId), oldName, client.Ino(in.Newdir), newName, in.Flags)
	}
	if err != nil {
		return fs.fail(opRename, err)
	}
	return gofuse.OK
}

// renameBusyPauses are the waits before each new try of a rename the
// service refused EBUSY.
var renameBusyPauses = [...]time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond}

// awaitReleases waits d, then until no RELEASE is being served, at most a
// second more.
func (fs *FS) awaitReleases(d time.Duration) {
	time.Sleep(d)
	for deadline := time.Now().Add(time.Second); fs.releasing.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// Link adds entry name in directory in.NodeId for node in.Oldnodeid.
func (fs *FS) Link(cancel <-chan struct{}, in *gofuse.LinkIn, name string, out *gofuse.EntryOut) (st gofuse.Status) {
	defer fs.observe(opLink, time.Now(), &st)
	defer fs.changing()()
	if fs.readOnly() {
		return gofuse.EROFS
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := fs.asWhole(&in.Caller)
	fs.fresh.naming(client.Ino(in.NodeId), name)
	fi, err := c.LinkAt(ctx, client.Ino(in.Oldnodeid), client.Ino(in.NodeId), name)
	if err != nil {
		return fs.fail(opLink, err)
	}
	fs.fillEntry(out, fi.Attr())
	return gofuse.OK
}

// Symlink creates symlink linkName pointing at target.
func (fs *FS) Symlink(cancel <-chan struct{}, h *gofuse.InHeader, target, linkName string, out *gofuse.EntryOut) (st gofuse.Status) {
	defer fs.observe(opSymlink, time.Now(), &st)
	defer fs.changing()()
	if fs.readOnly() {
		return gofuse.EROFS
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := fs.asWhole(&h.Caller)
	fs.fresh.naming(client.Ino(h.NodeId), linkName)
	fi, err := c.SymlinkAt(ctx, client.Ino(h.NodeId), linkName, target)
	if err != nil {
		return fs.fail(opSymlink, err)
	}
	fs.fillEntry(out, fi.Attr())
	return gofuse.OK
}

// Readlink answers a symlink's target.
func (fs *FS) Readlink(cancel <-chan struct{}, h *gofuse.InHeader) (target []byte, st gofuse.Status) {
	defer fs.observe(opReadlink, time.Now(), &st)
	ctx, c := fs.asWhole(&h.Caller)
	t, err := c.ReadlinkIno(ctx, client.Ino(h.NodeId))
	if err != nil {
		return nil, fs.fail(opReadlink, err)
	}
	return []byte(t), gofuse.OK
}
