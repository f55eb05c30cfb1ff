package client

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// pathError is fs.PathError, named for brevity.
type pathError = fs.PathError

// errnoOf returns the errno inside err, or err itself if there is none.
func errnoOf(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// inoName names an inode in error messages.
func inoName(ino Ino) string { return fmt.Sprintf("inode %d", ino) }
