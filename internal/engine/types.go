package engine

import (
	"syscall"

	"github.com/canopyfs/canopy/internal/protocol"
)

// Ino is an inode number. Its high bits carry the partition that owns the
// node, so any component can route an inode-based request without a
// lookup; the low bits are a counter local to the partition. The layout is
// the protocol's (internal/protocol).
type Ino uint64

// PartitionBits is the number of high bits of an Ino that hold the partition.
const PartitionBits = protocol.PartitionBits

// localBits is the number of low bits of an Ino that the partition allocates.
const localBits = protocol.LocalBits

// MakeIno returns the inode number with local number n in partition p.
func MakeIno(p uint16, n uint64) Ino { return Ino(protocol.MakeIno(p, n)) }

// Partition returns the partition that owns ino.
func (ino Ino) Partition() uint16 { return protocol.PartitionOf(uint64(ino)) }

// RootIno returns the inode number of the root directory of partition p.
func RootIno(p uint16) Ino { return Ino(protocol.RootIno(p)) }

// Limits, as on Linux.
const (
	MaxNameLen   = 255   // bytes in one path component
	MaxPathLen   = 4096  // bytes in a path
	MaxSymlinks  = 40    // symlinks followed while resolving one path
	MaxXattrName = 255   // bytes in an xattr name
	MaxXattrSize = 65536 // bytes in an xattr value
)

// File type bits of Attr.Mode, as in Linux st_mode.
const (
	S_IFMT   = syscall.S_IFMT
	S_IFDIR  = syscall.S_IFDIR
	S_IFREG  = syscall.S_IFREG
	S_IFLNK  = syscall.S_IFLNK
	S_IFIFO  = syscall.S_IFIFO
	S_IFSOCK = syscall.S_IFSOCK
	S_IFCHR  = syscall.S_IFCHR
	S_IFBLK  = syscall.S_IFBLK
	S_ISUID  = syscall.S_ISUID
	S_ISGID  = syscall.S_ISGID
	S_ISVTX  = syscall.S_ISVTX
)

// Cred is the identity of a caller, used for permission checks.
type Cred struct {
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups
}

// Root is the superuser's identity; it passes every permission check.
var Root = Cred{}

// IsRoot reports whether c is the superuser.
func (c Cred) IsRoot() bool { return c.UID == 0 }

// InGroup reports whether gid is c's primary or a supplementary group.
func (c Cred) InGroup(gid uint32) bool {
	if c.GID == gid {
		return true
	}
	for _, g := range c.Groups {
		if g == gid {
			return true
		}
	}
	return false
}

// Attr is a node's attributes, as in Linux struct stat.
type Attr struct {
	Ino   Ino
	Mode  uint32 // type bits and permission bits
	UID   uint32
	GID   uint32
	Nlink uint32
	Size  uint64 // bytes; for a symlink the target's length; for a directory 4096
	Atime int64  // nanoseconds since the Unix epoch
	Mtime int64
	Ctime int64
	Rdev  uint32
}

// IsDir reports whether the node is a directory.
func (a *Attr) IsDir() bool { return a.Mode&S_IFMT == S_IFDIR }

// SetAttr says which attributes SetAttr changes; a zero Valid changes
// nothing but still checks that the node exists.
type SetAttr struct {
	Valid uint32 // SetXxx bits
	Mode  uint32 // permission bits (and setuid/setgid/sticky); type bits ignored
	UID   uint32
	GID   uint32
	Size  uint64
	Atime int64
	Mtime int64
}

// SetAttr.Valid bits; equal to the wire protocol's SetattrMask values.
const (
	SetMode     = 1
	SetUID      = 2
	SetGID      = 4
	SetSize     = 8
	SetAtime    = 16
	SetMtime    = 32
	SetAtimeNow = 64
	SetMtimeNow = 128
	// SetOpenFile, with SetSize, sets the size through a descriptor open
	// for writing (ftruncate): its open checked write permission, and as
	// on Linux the size change checks none.
	SetOpenFile = 256
)

// Rename flags, as Linux renameat2.
const (
	RenameNoReplace = 1
	RenameExchange  = 2
)

// Xattr flags, as Linux setxattr.
const (
	XattrCreate  = 1
	XattrReplace = 2
)

// Dirent is one entry of a directory listing.
type Dirent struct {
	Name string
	Ino  Ino
	Type uint32 // type bits of the entry's mode
	Attr Attr   // filled when the listing asked for attributes
}

// Statfs is the file system's capacity and use.
type Statfs struct {
	TotalBytes  uint64
	UsedBytes   uint64
	TotalInodes uint64
	UsedInodes  uint64
	BlockSize   uint32
	MaxName     uint32
}

// Summary is a recursive content summary of a subtree.
type Summary struct {
	Dirs  uint64 // directories, including the root of the subtree if it is one
	Files uint64 // everything else
	Bytes uint64 // sum of the sizes of regular files
}
