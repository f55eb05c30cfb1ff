package fuse

import (
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// StatFs answers the capacity and use of the file system.
func (fs *FS) StatFs(cancel <-chan struct{}, h *gofuse.InHeader, out *gofuse.StatfsOut) (st gofuse.Status) {
	defer fs.observe(opStatfs, time.Now(), &st)
	ctx, c := fs.as(cancel, &h.Caller)
	s, err := c.StatfsIno(ctx, client.Ino(h.NodeId))
	if err != nil {
		return fs.fail(opStatfs, err)
	}
	bs := uint64(s.BlockSize)
	if bs == 0 {
		bs = 4096
	}
	free := uint64(0)
	if s.TotalBytes > s.UsedBytes {
		free = s.TotalBytes - s.UsedBytes
	}
	ffree := uint64(0)
	if s.TotalInodes > s.UsedInodes {
		ffree = s.TotalInodes - s.UsedInodes
	}
	*out = gofuse.StatfsOut{
		Blocks: s.TotalBytes / bs, Bfree: free / bs, Bavail: free / bs,
		Files: s.TotalInodes, Ffree: ffree,
		Bsize: uint32(bs), Frsize: uint32(bs), NameLen: s.MaxName,
	}
	return gofuse.OK
}
