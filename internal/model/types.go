package model

import "syscall"

// Ino is an inode number: the partition in the high 16 bits, a counter
// local to the partition below.
type Ino uint64

// MakeIno returns the inode number with local number n in partition p.
func MakeIno(p uint16, n uint64) Ino { return Ino(uint64(p)<<48 | n&(1<<48-1)) }

// Partition returns the partition of ino.
func (ino Ino) Partition() uint16 { return uint16(uint64(ino) / (1 << 48)) }

// Local returns the partition-local part of ino.
func (ino Ino) Local() uint64 { return uint64(ino) & (1<<48 - 1) }

// Linux limits, restated for the model. PATH_MAX (4096) counts the
// terminating NUL, so the longest path or symlink target is 4095 bytes.
const (
	NameMax    = 255
	PathMax    = 4096
	SymlinkMax = 40
	LinkMax    = 65000
	XattrName  = 255
	XattrValue = 65536
	DirSize    = 4096
	permR      = 4
	permW      = 2
	permX      = 1
)

// File type and mode bits, as in Linux st_mode.
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

// Rename flags, as renameat2.
const (
	RenameNoReplace = 1
	RenameExchange  = 2
)

// Xattr flags, as setxattr.
const (
	XattrCreate  = 1
	XattrReplace = 2
)

// SetAttr.Valid bits, equal to the engine's and the wire protocol's.
const (
	SetMode     = 1
	SetUID      = 2
	SetGID      = 4
	SetSize     = 8
	SetAtime    = 16
	SetMtime    = 32
	SetAtimeNow = 64
	SetMtimeNow = 128
)

// Cred is a caller's identity.
type Cred struct {
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups
}

// The callers the generator uses.
var (
	CredRoot = Cred{}
	CredU1   = Cred{UID: 1000, GID: 1000, Groups: []uint32{2000}}
	CredU2   = Cred{UID: 1001, GID: 1001}
)

// Attr is a node's attributes, as struct stat.
type Attr struct {
	Ino   Ino
	Mode  uint32 // type and permission bits
	UID   uint32
	GID   uint32
	Nlink uint32
	Size  uint64 // a directory's is DirSize, a symlink's its target's length
	Atime int64
	Mtime int64
	Ctime int64
	Rdev  uint32
}

// SetAttr says which attributes a setattr changes.
type SetAttr struct {
	Valid uint32 // SetXxx bits
	Mode  uint32
	UID   uint32
	GID   uint32
	Size  uint64
	Atime int64
	Mtime int64
}

// Dirent is one entry of a listing.
type Dirent struct {
	Name string
	Ino  Ino
	Type uint32 // type bits
	Attr Attr   // filled when the listing asked for attributes
}

// Statfs is the part of statfs the model predicts.
type Statfs struct {
	UsedBytes  uint64
	UsedInodes uint64
	BlockSize  uint32
	MaxName    uint32
}

// Summary is a recursive content summary of a subtree.
type Summary struct {
	Dirs  uint64
	Files uint64
	Bytes uint64
}
