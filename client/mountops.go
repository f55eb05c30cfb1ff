package client

import (
	"context"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// Inode-addressed statfs and extended attributes, for a FUSE layer that
// knows nodes only by number.

// StatfsIno returns the capacity and use of the file system holding ino.
func (c *Client) StatfsIno(ctx context.Context, ino Ino) (Statfs, error) {
	var r pb.StatfsReply
	if err := c.call(ctx, pb.Method_STATFS, &pb.NodeRequest{Ino: uint64(ino)}, &r, "statfs", inoName(ino)); err != nil {
		return Statfs{}, err
	}
	return statfsOf(&r), nil
}

// GetXattrIno returns the value of extended attribute name of ino.
func (c *Client) GetXattrIno(ctx context.Context, ino Ino, name string) ([]byte, error) {
	var r pb.XattrReply
	if err := c.call(ctx, pb.Method_GETXATTR, &pb.XattrRequest{Ino: uint64(ino), Name: name}, &r, "getxattr", inoName(ino)); err != nil {
		return nil, err
	}
	return r.Value, nil
}

// SetXattrIno sets extended attribute name of ino; flags may be
// XattrCreate or XattrReplace.
func (c *Client) SetXattrIno(ctx context.Context, ino Ino, name string, value []byte, flags uint32) error {
	req := &pb.XattrRequest{Ino: uint64(ino), Name: name, Value: value, Flags: flags}
	return c.call(ctx, pb.Method_SETXATTR, req, nil, "setxattr", inoName(ino))
}

// ListXattrIno returns the names of ino's extended attributes.
func (c *Client) ListXattrIno(ctx context.Context, ino Ino) ([]string, error) {
	var r pb.XattrListReply
	if err := c.call(ctx, pb.Method_LISTXATTR, &pb.NodeRequest{Ino: uint64(ino)}, &r, "listxattr", inoName(ino)); err != nil {
		return nil, err
	}
	return r.Names, nil
}

// RemoveXattrIno removes extended attribute name of ino.
func (c *Client) RemoveXattrIno(ctx context.Context, ino Ino, name string) error {
	return c.call(ctx, pb.Method_REMOVEXATTR, &pb.XattrRequest{Ino: uint64(ino), Name: name}, nil, "removexattr", inoName(ino))
}
