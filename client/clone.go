package client

import (
	"context"
	"path"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// Clone makes dst a writable copy of the file or tree src (not followed
// if a symlink): a metadata copy whose files share src's data until
// either side writes. Both must be in one partition (EXDEV otherwise).
// Without root the caller must be able to read all of src and owns the
// copy; root's copy keeps the owners. The copy counts against dst's
// quotas (EDQUOT).
func (c *Client) Clone(ctx context.Context, src, dst string) (*FileInfo, error) {
	var r pb.AttrReply
	if err := c.call(ctx, pb.Method_CLONE, &pb.CloneRequest{Path: src, NewPath: dst}, &r, "clone", src); err != nil {
		return nil, err
	}
	return newFileInfo(path.Base(dst), r.Attr), nil
}
