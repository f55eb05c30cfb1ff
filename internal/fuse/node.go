package fuse

import (
	"errors"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// Lookup answers the node id (the inode number) and attributes of entry
// name of directory h.NodeId.
func (fs *FS) Lookup(cancel <-chan struct{}, h *gofuse.InHeader, name string, out *gofuse.EntryOut) (st gofuse.Status) {
	defer fs.observe(opLookup, time.Now(), &st)
	if fs.fresh.absent(client.Ino(h.NodeId), name) {
		fs.m.freshHit()
		return fs.absent(out)
	}
	ctx, c := fs.asWhole(&h.Caller)
	fi, err := c.Lookup(ctx, client.Ino(h.NodeId), name)
	if errors.Is(err, syscall.ENOENT) {
		return fs.absent(out)
	}
	if err != nil {
		return fs.fail(opLookup, err)
	}
	fs.fillEntry(out, fs.withOpen(fi.Attr()))
	return gofuse.OK
}

// absent answers a LOOKUP of an absent name: ENOENT, or with a
// NegativeTimeout an entry without a node, which the kernel keeps that
// long.
func (fs *FS) absent(out *gofuse.EntryOut) gofuse.Status {
	if fs.opts.NegativeTimeout <= 0 {
		return gofuse.ENOENT
	}
	*out = gofuse.EntryOut{}
	out.SetEntryTimeout(fs.opts.NegativeTimeout)
	return gofuse.OK
}

// Forget does nothing: node ids are inode numbers, so the mount holds no
// state for the nodes the kernel knows.
func (fs *FS) Forget(nodeid, nlookup uint64) {}

// GetAttr answers the attributes of h.NodeId.
func (fs *FS) GetAttr(cancel <-chan struct{}, in *gofuse.GetAttrIn, out *gofuse.AttrOut) (st gofuse.Status) {
	defer fs.observe(opGetattr, time.Now(), &st)
	if a, ok := fs.dirAttrs.take(client.Ino(in.NodeId)); ok {
		fs.m.dirAttrHit()
		fs.fillAttrOut(out, a)
		return gofuse.OK
	}
	ctx, c := fs.asWhole(&in.Caller)
	fi, err := c.GetAttr(ctx, client.Ino(in.NodeId))
	if err != nil {
		return fs.fail(opGetattr, err)
	}
	a := fs.withOpen(fi.Attr())
	fs.fillAttrOut(out, a)
	return gofuse.OK
}

// SetAttr changes mode, owner, size and times (chmod, chown, truncate,
// utimensat) as the kernel's valid bits say.
func (fs *FS) SetAttr(cancel <-chan struct{}, in *gofuse.SetAttrIn, out *gofuse.AttrOut) (st gofuse.Status) {
	defer fs.observe(opSetattr, time.Now(), &st)
	defer fs.changingNode(client.Ino(in.NodeId))()
	s := setAttrOf(&in.SetAttrInCommon)
	if s.Valid != 0 && fs.readOnly() {
		return gofuse.EROFS
	}
	ino := client.Ino(in.NodeId)
	cred := fs.credOf(&in.Caller)
	if hs := fs.open.of(ino); len(hs) == 1 {
		if a, ok := fs.hold(hs[0], cred, s); ok {
			fs.fillAttrOut(out, fs.withOpen(a))
			return gofuse.OK
		}
	}
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := &gofuse.Context{Caller: in.Caller}, fs.c.As(cred)
	if fh, ok := in.GetFh(); ok && s.Valid&client.SetSize != 0 {
		// ftruncate, or the truncation of an O_TRUNC open: a descriptor
		// open for writing may change the size whatever the mode says now.
		if h, ok := fs.files.get(fh); ok && h.write {
			s.Valid |= client.SetOpenFile
		}
	}
	var fi *client.FileInfo
	var err error
	switch {
	case s.Valid == 0:
		fi, err = c.GetAttr(ctx, ino)
	case s.Valid&client.SetSize != 0:
		fi, err = fs.truncate(ctx, c, ino, s)
	default:
		if s.Valid&(client.SetMtime|client.SetMtimeNow) != 0 {
			// Writes buffered before the utimes must not stamp the file
			// with their commit time after it (tar -x, cp -p).
			err = fs.commitWriters(ino)
		}
		if err == nil {
			fi, err = c.SetAttrIno(ctx, ino, s)
		}
	}
	if err != nil {
		return fs.fail(opSetattr, err)
	}
	fs.fillAttrOut(out, fs.withOpen(fi.Attr()))
	return gofuse.OK
}

// setAttrOf converts the kernel's SETATTR to the service's. The change
// time and the file handle are not attributes to set: the service updates
// ctime itself.
func setAttrOf(in *gofuse.SetAttrInCommon) client.SetAttr {
	var s client.SetAttr
	if in.Valid&gofuse.FATTR_MODE != 0 {
		s.Valid |= client.SetMode
		s.Mode = in.Mode & 0o7777
	}
	if in.Valid&gofuse.FATTR_UID != 0 {
		s.Valid |= client.SetUID
		s.UID = in.Uid
	}
	if in.Valid&gofuse.FATTR_GID != 0 {
		s.Valid |= client.SetGID
		s.GID = in.Gid
	}
	if in.Valid&gofuse.FATTR_SIZE != 0 {
		s.Valid |= client.SetSize
		s.Size = in.Size
	}
	switch {
	case in.Valid&gofuse.FATTR_ATIME_NOW != 0:
		s.Valid |= client.SetAtimeNow
	case in.Valid&gofuse.FATTR_ATIME != 0:
		s.Valid |= client.SetAtime
		s.Atime = int64(in.Atime)*1e9 + int64(in.Atimensec)
	}
	switch {
	case in.Valid&gofuse.FATTR_MTIME_NOW != 0:
		s.Valid |= client.SetMtimeNow
	case in.Valid&gofuse.FATTR_MTIME != 0:
		s.Valid |= client.SetMtime
		s.Mtime = int64(in.Mtime)*1e9 + int64(in.Mtimensec)
	}
	return s
}

// Access answers access(2) and the kernel's checks before chdir when the
// kernel does not check permissions itself (NoDefaultPermissions; with
// default_permissions it sends no ACCESS): the service has no access
// call, so the mount applies the classic mode-bit rules to the node's
// attributes, as the caller's real uid and groups.
func (fs *FS) Access(cancel <-chan struct{}, in *gofuse.AccessIn) (st gofuse.Status) {
	defer fs.observe(opAccess, time.Now(), &st)
	ctx, c := fs.asWhole(&in.Caller)
	fi, err := c.GetAttr(ctx, client.Ino(in.NodeId))
	if err != nil {
		return fs.fail(opAccess, err)
	}
	if in.Mask&gofuse.W_OK != 0 && fs.readOnly() {
		return gofuse.EROFS
	}
	if !permitted(fs.withOpen(fi.Attr()), fs.credOf(&in.Caller), in.Mask) {
		return gofuse.EACCES
	}
	return gofuse.OK
}

// permitted applies the owner, group and other permission bits of a to
// cred asking for mask (R_OK, W_OK, X_OK). Root may do anything except
// execute a non-directory that nobody may execute.
func permitted(a client.Attr, cred client.Cred, mask uint32) bool {
	mask &= 7
	if mask == 0 {
		return true
	}
	if cred.UID == 0 {
		if mask&gofuse.X_OK == 0 || a.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			return true
		}
		return a.Mode&0o111 != 0
	}
	bits := a.Mode & 0o7
	switch {
	case cred.UID == a.UID:
		bits = a.Mode >> 6 & 0o7
	case inGroup(cred, a.GID):
		bits = a.Mode >> 3 & 0o7
	}
	return mask&^bits == 0
}

func inGroup(cred client.Cred, gid uint32) bool {
	if cred.GID == gid {
		return true
	}
	for _, g := range cred.Groups {
		if g == gid {
			return true
		}
	}
	return false
}
