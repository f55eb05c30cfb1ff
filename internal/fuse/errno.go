package fuse

import (
	"context"
	"errors"
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// maxErrno bounds the values taken as errnos; a larger status is the
// transport's (busy, malformed, ...) and surfaces as EIO.
const maxErrno = 4095

// errStatus maps an SDK error to the errno the kernel returns to the
// caller: the errno the service answered with, EINTR for an interrupted
// call, ETIMEDOUT for one that ran out of time, EIO for anything else (a
// lost connection, a reply that did not decode).
func errStatus(err error) gofuse.Status {
	if err == nil {
		return gofuse.OK
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 && errno <= maxErrno {
		return gofuse.Status(errno)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return gofuse.EINTR
	case errors.Is(err, context.DeadlineExceeded):
		return gofuse.Status(syscall.ETIMEDOUT)
	}
	return gofuse.EIO
}
