package client

import (
	"io/fs"
	"syscall"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// Attr is a node's attributes, as in Linux struct stat.
type Attr struct {
	Ino   Ino
	Mode  uint32 // Linux st_mode: type bits and permission bits
	UID   uint32
	GID   uint32
	Nlink uint32
	Size  uint64
	Atime time.Time
	Mtime time.Time
	Ctime time.Time
	Rdev  uint32
}

func attrFromPB(a *pb.Attr) Attr {
	if a == nil {
		return Attr{}
	}
	return Attr{
		Ino: Ino(a.Ino), Mode: a.Mode, UID: a.Uid, GID: a.Gid, Nlink: a.Nlink, Size: a.Size,
		Atime: time.Unix(0, a.AtimeNs), Mtime: time.Unix(0, a.MtimeNs), Ctime: time.Unix(0, a.CtimeNs),
		Rdev: a.Rdev,
	}
}

// FileMode converts a Linux st_mode to an fs.FileMode.
func FileMode(mode uint32) fs.FileMode {
	m := fs.FileMode(mode & 0o777)
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	}
	if mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// FileInfo describes a node; it implements fs.FileInfo, and Sys returns
// its *Attr.
type FileInfo struct {
	name string
	attr Attr
}

var _ fs.FileInfo = (*FileInfo)(nil)

func newFileInfo(name string, a *pb.Attr) *FileInfo {
	return &FileInfo{name: name, attr: attrFromPB(a)}
}

func (fi *FileInfo) Name() string       { return fi.name }
func (fi *FileInfo) Size() int64        { return int64(fi.attr.Size) }
func (fi *FileInfo) Mode() fs.FileMode  { return FileMode(fi.attr.Mode) }
func (fi *FileInfo) ModTime() time.Time { return fi.attr.Mtime }
func (fi *FileInfo) IsDir() bool        { return fi.attr.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func (fi *FileInfo) Sys() any           { return &fi.attr }

// Attr returns the node's full attributes.
func (fi *FileInfo) Attr() Attr { return fi.attr }

// Ino returns the node's inode number.
func (fi *FileInfo) Ino() Ino { return fi.attr.Ino }

// DirEntry is one entry of a directory listing; it implements fs.DirEntry.
type DirEntry struct {
	name string
	ino  Ino
	typ  uint32
	info *FileInfo // nil unless the listing asked for attributes
}

var _ fs.DirEntry = (*DirEntry)(nil)

func (d *DirEntry) Name() string      { return d.name }
func (d *DirEntry) IsDir() bool       { return d.typ == syscall.S_IFDIR }
func (d *DirEntry) Type() fs.FileMode { return FileMode(d.typ).Type() }
func (d *DirEntry) Ino() Ino          { return d.ino }

// Info returns the entry's attributes as the listing saw them, or
// fs.ErrNotExist if the listing did not ask for them.
func (d *DirEntry) Info() (fs.FileInfo, error) {
	if d.info == nil {
		return nil, fs.ErrNotExist
	}
	return d.info, nil
}
