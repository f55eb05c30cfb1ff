package fuse

import (
	"context"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// accessMask is the access an open(2) with flags asks for.
func accessMask(flags uint32) uint32 {
	switch flags & syscall.O_ACCMODE {
	case syscall.O_WRONLY:
		return gofuse.W_OK
	case syscall.O_RDWR:
		return gofuse.R_OK | gofuse.W_OK
	}
	return gofuse.R_OK
}

// Open opens a file: the caller must be allowed the access its flags ask
// for.
func (fs *FS) Open(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) (st gofuse.Status) {
	defer fs.observe(opOpen, time.Now(), &st)
	if in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY && fs.readOnly() {
		return gofuse.EROFS
	}
	ctx, c := fs.as(cancel, &in.Caller)
	fi, err := c.GetAttr(ctx, client.Ino(in.NodeId))
	if err != nil {
		return fs.fail(opOpen, err)
	}
	if !permitted(fi.Attr(), fs.credOf(&in.Caller), accessMask(in.Flags)) {
		return gofuse.EACCES
	}
	return gofuse.OK
}

// Create creates and opens a regular file.
func (fs *FS) Create(cancel <-chan struct{}, in *gofuse.CreateIn, name string, out *gofuse.CreateOut) (st gofuse.Status) {
	defer fs.observe(opCreate, time.Now(), &st)
	if fs.readOnly() {
		return gofuse.EROFS
	}
	ctx, c := fs.asMutation(&in.Caller)
	fi, err := c.MknodAt(ctx, client.Ino(in.NodeId), name, syscall.S_IFREG|in.Mode&0o7777, 0)
	if err != nil {
		return fs.fail(opCreate, err)
	}
	fs.fillEntry(&out.EntryOut, fi.Attr())
	return gofuse.OK
}

// withOpenSize returns a as the kernel should see it.
func (fs *FS) withOpenSize(a client.Attr) client.Attr { return a }

// truncate changes a file's size.
func (fs *FS) truncate(ctx context.Context, c *client.Client, ino client.Ino, s client.SetAttr) (*client.FileInfo, error) {
	return c.SetAttrIno(ctx, ino, s)
}
