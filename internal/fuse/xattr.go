package fuse

import (
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// GetXAttr copies the value of attribute name into dest. With an empty
// dest it answers the value's size; with one too small, ERANGE.
func (fs *FS) GetXAttr(cancel <-chan struct{}, h *gofuse.InHeader, name string, dest []byte) (size uint32, st gofuse.Status) {
	defer fs.observe(opGetxattr, time.Now(), &st)
	ino := client.Ino(h.NodeId)
	if name == capabilityXattr && fs.noCaps.has(ino) {
		fs.m.noCapsHit()
		return 0, gofuse.ENODATA
	}
	if st := fs.sendHeld(ino); st != gofuse.OK { // a mode change moves the ACL's mask
		return 0, st
	}
	ctx, c := fs.asWhole(&h.Caller)
	v, err := c.GetXattrIno(ctx, ino, name)
	if err != nil {
		st := fs.fail(opGetxattr, err)
		if name == capabilityXattr && st == gofuse.ENODATA {
			fs.noCaps.add(ino)
		}
		return 0, st
	}
	if len(v) > len(dest) {
		return uint32(len(v)), gofuse.ERANGE
	}
	return uint32(copy(dest, v)), gofuse.OK
}

// ListXAttr copies the attribute names, each ended by a NUL, into dest,
// with GetXAttr's rules for sizes.
func (fs *FS) ListXAttr(cancel <-chan struct{}, h *gofuse.InHeader, dest []byte) (size uint32, st gofuse.Status) {
	defer fs.observe(opListxattr, time.Now(), &st)
	if st := fs.sendHeld(client.Ino(h.NodeId)); st != gofuse.OK {
		return 0, st
	}
	ctx, c := fs.asWhole(&h.Caller)
	names, err := c.ListXattrIno(ctx, client.Ino(h.NodeId))
	if err != nil {
		return 0, fs.fail(opListxattr, err)
	}
	n := 0
	for _, name := range names {
		n += len(name) + 1
	}
	if n > len(dest) {
		return uint32(n), gofuse.ERANGE
	}
	off := 0
	for _, name := range names {
		off += copy(dest[off:], name)
		dest[off] = 0
		off++
	}
	return uint32(n), gofuse.OK
}

// SetXAttr sets an attribute; in.Flags are setxattr's XATTR_CREATE and
// XATTR_REPLACE, which the service takes as they are.
func (fs *FS) SetXAttr(cancel <-chan struct{}, in *gofuse.SetXAttrIn, name string, value []byte) (st gofuse.Status) {
	defer fs.observe(opSetxattr, time.Now(), &st)
	defer fs.changingNode(client.Ino(in.NodeId))()
	if fs.readOnly() {
		return gofuse.EROFS
	}
	fs.noCaps.drop(client.Ino(in.NodeId))
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := fs.asWhole(&in.Caller)
	if err := c.SetXattrIno(ctx, client.Ino(in.NodeId), name, value, in.Flags); err != nil {
		return fs.fail(opSetxattr, err)
	}
	return gofuse.OK
}

// RemoveXAttr removes an attribute.
func (fs *FS) RemoveXAttr(cancel <-chan struct{}, h *gofuse.InHeader, name string) (st gofuse.Status) {
	defer fs.observe(opRemovexattr, time.Now(), &st)
	defer fs.changingNode(client.Ino(h.NodeId))()
	if fs.readOnly() {
		return gofuse.EROFS
	}
	fs.noCaps.drop(client.Ino(h.NodeId))
	if st := fs.sendAllHeld(); st != gofuse.OK {
		return st
	}
	ctx, c := fs.asWhole(&h.Caller)
	if err := c.RemoveXattrIno(ctx, client.Ino(h.NodeId), name); err != nil {
		return fs.fail(opRemovexattr, err)
	}
	return gofuse.OK
}
