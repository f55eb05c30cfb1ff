package client

import (
	"io/fs"
	"syscall"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// Attr is a node's attributes, as in Linux struct stat.
type Attr struct {
	Ino   Ino       // inode number
	Mode  uint32    // Linux st_mode: type bits and permission bits
	UID   uint32    // owner
	GID   uint32    // group
	Nlink uint32    // hard links
	Size  uint64    // length in bytes
	Atime time.Time // last access
	Mtime time.Time // last change of the contents
	Ctime time.Time // last change of the attributes or the contents
	Rdev  uint32    // device number of a device node
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

// Name returns the name the call that returned fi reached the node by (the
// last element of its path, or the entry's name); calls that address a
// node by inode number alone (GetAttr, OpenIno) leave it empty.
func (fi *FileInfo) Name() string { return fi.name }

// Size returns the node's length in bytes.
func (fi *FileInfo) Size() int64 { return int64(fi.attr.Size) }

// Mode returns the node's type and permission bits as an fs.FileMode.
func (fi *FileInfo) Mode() fs.FileMode { return FileMode(fi.attr.Mode) }

// ModTime returns the time the contents last changed.
func (fi *FileInfo) ModTime() time.Time { return fi.attr.Mtime }

// IsDir reports whether the node is a directory.
func (fi *FileInfo) IsDir() bool { return fi.attr.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// Sys returns the node's full attributes, a *Attr.
func (fi *FileInfo) Sys() any { return &fi.attr }

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

// Name returns the entry's name in its directory.
func (d *DirEntry) Name() string { return d.name }

// IsDir reports whether the entry is a directory.
func (d *DirEntry) IsDir() bool { return d.typ == syscall.S_IFDIR }

// Type returns the type bits of the entry's mode.
func (d *DirEntry) Type() fs.FileMode { return FileMode(d.typ).Type() }

// Ino returns the inode number the entry names.
func (d *DirEntry) Ino() Ino { return d.ino }

// Info returns the entry's attributes as the listing saw them, or
// fs.ErrNotExist if the listing did not ask for them.
func (d *DirEntry) Info() (fs.FileInfo, error) {
	if d.info == nil {
		return nil, fs.ErrNotExist
	}
	return d.info, nil
}
