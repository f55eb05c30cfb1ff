package client

import (
	"context"
	"fmt"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// The calls below address nodes by inode number, as a FUSE mount does.

// SetAttr says which attributes SetAttr changes: Valid holds SetattrMask
// bits of the protocol (pb.SetattrMask_*).
type SetAttr struct {
	Valid        uint32
	Mode         uint32
	UID, GID     uint32
	Size         uint64
	Atime, Mtime int64 // nanoseconds since the epoch
}

// Setattr mask bits.
const (
	SetMode     = uint32(pb.SetattrMask_SETATTR_MODE)
	SetUID      = uint32(pb.SetattrMask_SETATTR_UID)
	SetGID      = uint32(pb.SetattrMask_SETATTR_GID)
	SetSize     = uint32(pb.SetattrMask_SETATTR_SIZE)
	SetAtime    = uint32(pb.SetattrMask_SETATTR_ATIME)
	SetMtime    = uint32(pb.SetattrMask_SETATTR_MTIME)
	SetAtimeNow = uint32(pb.SetattrMask_SETATTR_ATIME_NOW)
	SetMtimeNow = uint32(pb.SetattrMask_SETATTR_MTIME_NOW)
)

func entryName(parent Ino, name string) string { return fmt.Sprintf("inode %d/%s", parent, name) }

// Lookup returns the attributes of entry name in directory parent.
func (c *Client) Lookup(ctx context.Context, parent Ino, name string) (*FileInfo, error) {
	var r pb.AttrReply
	if err := c.call(ctx, pb.Method_LOOKUP, &pb.EntryRequest{Parent: uint64(parent), Name: name}, &r, "lookup", entryName(parent, name)); err != nil {
		return nil, err
	}
	return newFileInfo(name, r.Attr), nil
}

// GetAttr returns the attributes of ino.
func (c *Client) GetAttr(ctx context.Context, ino Ino) (*FileInfo, error) {
	var r pb.AttrReply
	if err := c.call(ctx, pb.Method_GETATTR, &pb.NodeRequest{Ino: uint64(ino)}, &r, "getattr", inoName(ino)); err != nil {
		return nil, err
	}
	return newFileInfo("", r.Attr), nil
}

// SetAttrIno changes the attributes of ino that s.Valid names.
func (c *Client) SetAttrIno(ctx context.Context, ino Ino, s SetAttr) (*FileInfo, error) {
	return c.setattr(ctx, "setattr", &pb.SetattrRequest{
		Ino: uint64(ino), Valid: s.Valid, Mode: s.Mode, Uid: s.UID, Gid: s.GID, Size: s.Size,
		AtimeNs: s.Atime, MtimeNs: s.Mtime,
	})
}

// MkdirAt creates directory name in parent.
func (c *Client) MkdirAt(ctx context.Context, parent Ino, name string, perm uint32) (*FileInfo, error) {
	return c.createAt(ctx, pb.Method_MKDIR, "mkdir", &pb.CreateRequest{Parent: uint64(parent), Name: name, Mode: perm})
}

// MknodAt creates a regular file, fifo, socket or device node name in parent.
func (c *Client) MknodAt(ctx context.Context, parent Ino, name string, mode, rdev uint32) (*FileInfo, error) {
	return c.createAt(ctx, pb.Method_MKNOD, "mknod", &pb.CreateRequest{Parent: uint64(parent), Name: name, Mode: mode, Rdev: rdev})
}

// SymlinkAt creates symlink name in parent pointing at target.
func (c *Client) SymlinkAt(ctx context.Context, parent Ino, name, target string) (*FileInfo, error) {
	return c.createAt(ctx, pb.Method_SYMLINK, "symlink", &pb.CreateRequest{Parent: uint64(parent), Name: name, Target: target})
}

func (c *Client) createAt(ctx context.Context, m pb.Method, op string, req *pb.CreateRequest) (*FileInfo, error) {
	var r pb.AttrReply
	if err := c.call(ctx, m, req, &r, op, entryName(Ino(req.Parent), req.Name)); err != nil {
		return nil, err
	}
	return newFileInfo(req.Name, r.Attr), nil
}

// LinkAt adds entry newName in newParent for node ino.
func (c *Client) LinkAt(ctx context.Context, ino, newParent Ino, newName string) (*FileInfo, error) {
	var r pb.AttrReply
	req := &pb.LinkRequest{Ino: uint64(ino), NewParent: uint64(newParent), NewName: newName}
	if err := c.call(ctx, pb.Method_LINK, req, &r, "link", entryName(newParent, newName)); err != nil {
		return nil, err
	}
	return newFileInfo(newName, r.Attr), nil
}

// UnlinkAt removes non-directory entry name from parent.
func (c *Client) UnlinkAt(ctx context.Context, parent Ino, name string) error {
	return c.call(ctx, pb.Method_UNLINK, &pb.EntryRequest{Parent: uint64(parent), Name: name}, nil, "unlink", entryName(parent, name))
}

// RmdirAt removes empty directory name from parent.
func (c *Client) RmdirAt(ctx context.Context, parent Ino, name string) error {
	return c.call(ctx, pb.Method_RMDIR, &pb.EntryRequest{Parent: uint64(parent), Name: name}, nil, "rmdir", entryName(parent, name))
}

// RenameAt moves entry name of parent to newName in newParent, with
// renameat2 flags.
func (c *Client) RenameAt(ctx context.Context, parent Ino, name string, newParent Ino, newName string, flags uint32) error {
	req := &pb.RenameRequest{Parent: uint64(parent), Name: name, NewParent: uint64(newParent), NewName: newName, Flags: flags}
	return c.call(ctx, pb.Method_RENAME, req, nil, "rename", entryName(parent, name))
}

// ReadlinkIno returns the target of symlink ino.
func (c *Client) ReadlinkIno(ctx context.Context, ino Ino) (string, error) {
	var r pb.ReadlinkReply
	if err := c.call(ctx, pb.Method_READLINK, &pb.NodeRequest{Ino: uint64(ino)}, &r, "readlink", inoName(ino)); err != nil {
		return "", err
	}
	return r.Target, nil
}

// ReadDirIno returns a page of directory ino, as ReadDirPage.
func (c *Client) ReadDirIno(ctx context.Context, ino Ino, cursor string, limit uint32, attrs bool) ([]*DirEntry, string, bool, error) {
	return c.readdir(ctx, &pb.ReaddirRequest{Ino: uint64(ino), Cursor: cursor, Limit: limit, Attrs: attrs}, inoName(ino))
}
