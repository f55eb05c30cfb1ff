package client

import (
	"context"
	"fmt"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// The calls below address nodes by inode number, as a FUSE mount does.

// SetAttr says which attributes SetAttrIno changes and to what: Valid is
// an OR of the Set* bits below, and only the fields they name are used.
type SetAttr struct {
	Valid        uint32 // Set* bits
	Mode         uint32 // SetMode: permission bits (and setuid, setgid, sticky)
	UID, GID     uint32 // SetUID, SetGID
	Size         uint64 // SetSize
	Atime, Mtime int64  // SetAtime, SetMtime: nanoseconds since the epoch
}

// SetAttr.Valid bits, one per attribute; SetAtimeNow and SetMtimeNow set
// the time to the server's clock instead of SetAttr's.
const (
	SetMode     = uint32(pb.SetattrMask_SETATTR_MODE)
	SetUID      = uint32(pb.SetattrMask_SETATTR_UID)
	SetGID      = uint32(pb.SetattrMask_SETATTR_GID)
	SetSize     = uint32(pb.SetattrMask_SETATTR_SIZE)
	SetAtime    = uint32(pb.SetattrMask_SETATTR_ATIME)
	SetMtime    = uint32(pb.SetattrMask_SETATTR_MTIME)
	SetAtimeNow = uint32(pb.SetattrMask_SETATTR_ATIME_NOW)
	SetMtimeNow = uint32(pb.SetattrMask_SETATTR_MTIME_NOW)
	// SetOpenFile, with SetSize, truncates through a descriptor open for
	// writing (ftruncate): write permission was checked when it was
	// opened, so the service checks none for the size.
	SetOpenFile = uint32(pb.SetattrMask_SETATTR_OPEN_FILE)
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

// MkdirAtMasked is MkdirAt with the creator's umask, which the service
// applies unless parent has a default ACL (which masks perm instead), as
// Linux does for a file system with POSIX ACLs.
func (c *Client) MkdirAtMasked(ctx context.Context, parent Ino, name string, perm, umask uint32) (*FileInfo, error) {
	return c.createAt(ctx, pb.Method_MKDIR, "mkdir", &pb.CreateRequest{Parent: uint64(parent), Name: name, Mode: perm, Umask: umask})
}

// MknodAtMasked is MknodAt with the creator's umask, with MkdirAtMasked's
// rule.
func (c *Client) MknodAtMasked(ctx context.Context, parent Ino, name string, mode, rdev, umask uint32) (*FileInfo, error) {
	return c.createAt(ctx, pb.Method_MKNOD, "mknod", &pb.CreateRequest{Parent: uint64(parent), Name: name, Mode: mode, Rdev: rdev, Umask: umask})
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
