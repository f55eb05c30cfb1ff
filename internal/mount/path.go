package mount

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// Limits of a path, the same as the metadata engine's (and Linux's).
const (
	// MaxPathLen bounds the length of a path: a path must be shorter than
	// MaxPathLen bytes, because the limit counts the terminating NUL.
	MaxPathLen = 4096
	// MaxNameLen is the largest number of bytes in one path component.
	MaxNameLen = 255
)

// Normalize returns the canonical form of an absolute path, the form the
// mount table stores and Lookup expects:
//
//   - repeated slashes are collapsed and a trailing slash is dropped, except
//     for the root "/";
//   - "." components are dropped;
//   - ".." removes the component before it, lexically, without looking at
//     the namespace (a symlink before ".." is not followed); ".." at the
//     root stays at the root, as "/.." is "/" on Linux.
//
// The checks come first and apply to the path as given, as a system call
// would apply them: a path of MaxPathLen bytes or more, or with a component
// (including one that a later ".." removes) longer than MaxNameLen, fails
// with ENAMETOOLONG; the empty path fails with ENOENT; a relative path or a
// path containing NUL fails with EINVAL. The returned error wraps the
// errno.
//
// A path that is already canonical is returned as it is, without
// allocating.
func Normalize(path string) (string, error) {
	switch {
	case len(path) >= MaxPathLen:
		return "", pathError(path, syscall.ENAMETOOLONG, "longer than the limit")
	case path == "":
		return "", pathError(path, syscall.ENOENT, "empty")
	case path[0] != '/':
		return "", pathError(path, syscall.EINVAL, "not absolute")
	case strings.IndexByte(path, 0) >= 0:
		return "", pathError(path, syscall.EINVAL, "contains NUL")
	}
	clean, err := scan(path)
	if err != nil {
		return "", err
	}
	if clean {
		return path, nil
	}
	return rebuild(path), nil
}

// scan checks the length of every component of the absolute path, which
// holds no NUL, and reports whether it is already in canonical form.
func scan(path string) (clean bool, err error) {
	clean = true
	start := 1 // first byte of the current component
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		comp := path[start:i]
		switch {
		case len(comp) > MaxNameLen:
			return false, pathError(path, syscall.ENAMETOOLONG, "component longer than the limit")
		case comp == "":
			// "//" inside, or a trailing slash; only "/" itself may end in one.
			if i < len(path) || len(path) > 1 {
				clean = false
			}
		case comp == "." || comp == "..":
			clean = false
		}
		start = i + 1
	}
	return clean, nil
}

// rebuild returns the canonical form of an absolute path that scan has
// accepted.
func rebuild(path string) string {
	out := make([]byte, 0, len(path))
	for i := 0; i < len(path); {
		for i < len(path) && path[i] == '/' {
			i++
		}
		j := i
		for j < len(path) && path[j] != '/' {
			j++
		}
		switch comp := path[i:j]; comp {
		case "", ".":
		case "..":
			k := len(out) - 1
			for k >= 0 && out[k] != '/' {
				k--
			}
			if k < 0 {
				k = 0
			}
			out = out[:k]
		default:
			out = append(out, '/')
			out = append(out, comp...)
		}
		i = j
	}
	if len(out) == 0 {
		return "/"
	}
	// out is not used again, so the string can share its bytes.
	return unsafe.String(&out[0], len(out))
}

// isNormal reports whether path is in the form Normalize returns.
func isNormal(path string) bool {
	n, err := Normalize(path)
	return err == nil && n == path
}

// pathError describes a rejected path. Long paths are shortened in the
// message; the errno is wrapped.
func pathError(path string, errno syscall.Errno, why string) error {
	return fmt.Errorf("mount: path %s %s: %w", quoteShort(path), why, errno)
}

// quoteShort quotes s for a message, cut to its first 64 bytes.
func quoteShort(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:max]) + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
