package client

import (
	"context"
	"path"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// Concat appends the contents of the regular files srcs, in order, to the
// end of the regular file dst without copying their bytes: dst comes to
// reference the slices the sources store, which stay the sources' too,
// and the collector removes a slice's objects only once no file uses it.
// It needs write permission on dst and read permission on the sources;
// every file must be in one partition. A layout that cannot be shared
// (dst among the sources, a source's slice that would land twice in one
// chunk of dst) is refused with EINVAL, and nothing changes: copy the
// bytes instead. It returns dst's attributes afterwards.
func (c *Client) Concat(ctx context.Context, dst string, srcs ...string) (*FileInfo, error) {
	d, err := c.Stat(ctx, dst)
	if err != nil {
		return nil, err
	}
	inos := make([]Ino, len(srcs))
	for i, s := range srcs {
		fi, err := c.Stat(ctx, s)
		if err != nil {
			return nil, err
		}
		inos[i] = fi.Ino()
	}
	fi, err := c.ConcatIno(ctx, d.Ino(), inos)
	if err != nil {
		return nil, err
	}
	fi.name = path.Base(dst)
	return fi, nil
}

// ConcatIno is Concat of files named by inode.
func (c *Client) ConcatIno(ctx context.Context, dst Ino, srcs []Ino) (*FileInfo, error) {
	req := &pb.ConcatRequest{Ino: uint64(dst), Sources: make([]uint64, len(srcs))}
	for i, s := range srcs {
		req.Sources[i] = uint64(s)
	}
	var r pb.AttrReply
	if err := c.call(ctx, pb.Method_CONCAT, req, &r, "concat", inoName(dst)); err != nil {
		return nil, err
	}
	return newFileInfo("", r.Attr), nil
}
