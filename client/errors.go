package client

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
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

// DetailError is an error reply that came with the server's explanation:
// its Error is that sentence, and it unwraps to the errno, so errors.Is
// matches both syscall.EINVAL and the io/fs sentinels as for a bare errno.
type DetailError struct {
	Errno   syscall.Errno // the reply's status
	Message string        // the server's explanation
}

// Error returns the server's explanation.
func (e *DetailError) Error() string { return e.Message }

// Unwrap returns the errno, for errors.Is and errors.As.
func (e *DetailError) Unwrap() error { return e.Errno }

// replyError is the error of a reply with status errno and payload out: a
// *DetailError if out is an ErrorDetail with a message, the errno if not.
func replyError(errno syscall.Errno, out []byte) error {
	if len(out) == 0 {
		return errno
	}
	var d pb.ErrorDetail
	if proto.Unmarshal(out, &d) != nil || d.Message == "" {
		return errno
	}
	return &DetailError{Errno: errno, Message: d.Message}
}
