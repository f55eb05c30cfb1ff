package fuse

import (
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// ioBlockSize is the st_blksize the mount reports: the preferred I/O size
// that tools such as cp use for their buffers.
const ioBlockSize = 1 << 16

// fillAttr converts a Canopy node's attributes to the kernel's.
func fillAttr(out *gofuse.Attr, a client.Attr) {
	out.Ino = uint64(a.Ino)
	out.Size = a.Size
	out.Blocks = (a.Size + 511) / 512
	out.Mode = a.Mode
	out.Nlink = a.Nlink
	out.Uid = a.UID
	out.Gid = a.GID
	out.Rdev = a.Rdev
	out.Blksize = ioBlockSize
	setTime(&out.Atime, &out.Atimensec, a.Atime)
	setTime(&out.Mtime, &out.Mtimensec, a.Mtime)
	setTime(&out.Ctime, &out.Ctimensec, a.Ctime)
}

func setTime(sec *uint64, nsec *uint32, t time.Time) {
	ns := t.UnixNano()
	if ns < 0 {
		*sec, *nsec = 0, 0
		return
	}
	*sec = uint64(ns / 1e9)
	*nsec = uint32(ns % 1e9)
}

// fillEntry answers a LOOKUP or a create with the node's id (its inode
// number), attributes and cache timeouts.
func (fs *FS) fillEntry(out *gofuse.EntryOut, a client.Attr) {
	out.NodeId = uint64(a.Ino)
	out.Generation = 0
	out.SetEntryTimeout(fs.opts.EntryTimeout)
	out.SetAttrTimeout(fs.opts.AttrTimeout)
	fillAttr(&out.Attr, a)
}

// fillAttrOut answers a GETATTR or SETATTR.
func (fs *FS) fillAttrOut(out *gofuse.AttrOut, a client.Attr) {
	out.SetTimeout(fs.opts.AttrTimeout)
	fillAttr(&out.Attr, a)
}
