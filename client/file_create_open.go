package client

import (
	"context"
	"errors"
	"os"
	"syscall"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// CreateOpenIno creates regular file name in directory parent, with the
// permission bits of mode less umask (as MknodAtMasked), and opens it
// with open(2) flags as OpenFileIno does for the open that completes a
// create (O_CREAT): one call to the service, CREATE_OPEN, instead of
// MKNOD and OPEN. It returns the open file, the new file's attributes and
// the parent's just after the create (nil if the service did not send
// them). A service without CREATE_OPEN (an unknown method, or ENOSYS
// from a router) is asked with MKNOD and OPEN instead. ctx serves all the file's calls.
func (c *Client) CreateOpenIno(ctx context.Context, parent Ino, name string, mode, umask uint32, flag int) (*File, *FileInfo, *FileInfo, error) {
	vol, err := c.dataVolume(ctx)
	if err != nil {
		return nil, nil, nil, &pathError{Op: "create", Path: entryName(parent, name), Err: err}
	}
	oflags := uint32(flag & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC))
	req := &pb.CreateRequest{Parent: uint64(parent), Name: name, Mode: syscall.S_IFREG | mode&0o7777, Umask: umask, OpenFlags: oflags}
	// A create changes the namespace: the partition must be synced at the
	// next Sync, as for MKNOD.
	c.unsynced.note(pb.Method_MKNOD, req)
	var r pb.AttrReply
	err = c.call(ctx, pb.Method_CREATE_OPEN, req, &r, "create", entryName(parent, name))
	if unknownMethod(err) {
		fi, err := c.MknodAtMasked(ctx, parent, name, req.Mode, 0, umask)
		if err != nil {
			return nil, nil, nil, err
		}
		f, err := c.OpenFileIno(ctx, fi.Ino(), flag|os.O_CREATE)
		if err != nil {
			return nil, nil, nil, err
		}
		return f, fi, nil, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	fi := newFileInfo(name, r.Attr)
	ino := fi.Ino()
	c.locks.held(c, ino)
	var dir *FileInfo
	if r.Parent != nil && Ino(r.Parent.Ino) == parent {
		dir = newFileInfo("", r.Parent)
	}
	f := &File{c: c, ctx: ctx, name: inoName(ino), ino: ino, flag: flag | os.O_CREATE}
	f.r = vol.NewReader((*dataPath)(c), uint64(ino))
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		f.w = vol.NewWriter((*dataPath)(c), uint64(ino), 0)
	}
	return f, fi, dir, nil
}

// unknownMethod reports whether err says the service does not know the
// method called.
func unknownMethod(err error) bool {
	var se *rpc.StatusError
	return errors.Is(err, syscall.ENOSYS) || errors.As(err, &se) && se.Status == rpc.StatusUnknownMethod
}
