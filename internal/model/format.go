package model

import (
	"fmt"
	"sort"
	"strings"
	"syscall"
)

var errnoNames = map[syscall.Errno]string{
	syscall.E2BIG: "E2BIG", syscall.EACCES: "EACCES", syscall.EBADF: "EBADF",
	syscall.EBUSY: "EBUSY", syscall.EEXIST: "EEXIST", syscall.EFBIG: "EFBIG",
	syscall.EINVAL: "EINVAL", syscall.EIO: "EIO", syscall.EISDIR: "EISDIR",
	syscall.ELOOP: "ELOOP", syscall.EMLINK: "EMLINK", syscall.ENAMETOOLONG: "ENAMETOOLONG",
	syscall.ENODATA: "ENODATA", syscall.ENOENT: "ENOENT", syscall.ENOSPC: "ENOSPC",
	syscall.ENOTDIR: "ENOTDIR", syscall.ENOTEMPTY: "ENOTEMPTY", syscall.EOPNOTSUPP: "EOPNOTSUPP",
	syscall.EPERM: "EPERM", syscall.ERANGE: "ERANGE", syscall.EXDEV: "EXDEV", syscall.EDQUOT: "EDQUOT", syscall.EROFS: "EROFS",
}

// ErrnoName is the errno's symbol ("ok" for 0).
func ErrnoName(en syscall.Errno) string {
	if en == 0 {
		return "ok"
	}
	if s, ok := errnoNames[en]; ok {
		return s
	}
	return fmt.Sprintf("errno(%d)", int(en))
}

// ModeString formats a mode like ls -l.
func ModeString(mode uint32) string {
	var b [10]byte
	b[0] = "?pc?d?b?-?l?s???"[mode&S_IFMT>>12]
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if mode&(1<<(8-i)) != 0 {
			b[1+i] = rwx[i]
		} else {
			b[1+i] = '-'
		}
	}
	special := func(i int, bit uint32, set, unset byte) {
		if mode&bit == 0 {
			return
		}
		if b[i] == '-' {
			b[i] = unset
		} else {
			b[i] = set
		}
	}
	special(3, S_ISUID, 's', 'S')
	special(6, S_ISGID, 's', 'S')
	special(9, S_ISVTX, 't', 'T')
	return string(b[:])
}

// TypeName names a node type.
func TypeName(t uint32) string {
	switch t & S_IFMT {
	case S_IFDIR:
		return "dir"
	case S_IFREG:
		return "file"
	case S_IFLNK:
		return "symlink"
	case S_IFIFO:
		return "fifo"
	case S_IFSOCK:
		return "socket"
	case S_IFCHR:
		return "chardev"
	case S_IFBLK:
		return "blockdev"
	}
	return fmt.Sprintf("type(%o)", t)
}

// FormatAttr formats every field of a, for failure messages.
func FormatAttr(a Attr) string {
	return fmt.Sprintf("{ino=%d:%d mode=%s(%o) uid=%d gid=%d nlink=%d size=%d atime=%d mtime=%d ctime=%d rdev=%d}",
		a.Ino.Partition(), a.Ino.Local(), ModeString(a.Mode), a.Mode, a.UID, a.GID, a.Nlink, a.Size, a.Atime, a.Mtime, a.Ctime, a.Rdev)
}

// FormatDirents formats a listing, for failure messages.
func FormatDirents(ents []Dirent) string {
	parts := make([]string, len(ents))
	for i, e := range ents {
		parts[i] = fmt.Sprintf("%s:%d:%s", quote(e.Name), e.Ino.Local(), TypeName(e.Type))
		if e.Attr != (Attr{}) {
			parts[i] += FormatAttr(e.Attr)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func sortStrings(s []string) { sort.Strings(s) }
