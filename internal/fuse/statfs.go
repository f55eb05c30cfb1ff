package fuse

import (
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// StatFs answers the capacity and use of the file system: the server's
// figures (through a router, the sum over every mounted partition), in
// blocks of the server's block size. Used bytes are rounded up to whole
// blocks, so that a file system holding a few bytes shows a block used
// rather than none.
func (fs *FS) StatFs(cancel <-chan struct{}, h *gofuse.InHeader, out *gofuse.StatfsOut) (st gofuse.Status) {
	defer fs.observe(opStatfs, time.Now(), &st)
	ctx, c := fs.asWhole(&h.Caller)
	s, err := c.StatfsIno(ctx, client.Ino(h.NodeId))
	if err != nil {
		return fs.fail(opStatfs, err)
	}
	*out = statfsOut(s)
	return gofuse.OK
}

// statfsOut converts the server's figures to the kernel's.
func statfsOut(s client.Statfs) gofuse.StatfsOut {
	bs := uint64(s.BlockSize)
	if bs == 0 {
		bs = 4096
	}
	blocks := s.TotalBytes / bs
	used := min(s.UsedBytes/bs+min(s.UsedBytes%bs, 1), blocks)
	ffree := uint64(0)
	if s.TotalInodes > s.UsedInodes {
		ffree = s.TotalInodes - s.UsedInodes
	}
	return gofuse.StatfsOut{
		Blocks: blocks, Bfree: blocks - used, Bavail: blocks - used,
		Files: s.TotalInodes, Ffree: ffree,
		Bsize: uint32(bs), Frsize: uint32(bs), NameLen: s.MaxName,
	}
}
