package client

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
)

func TestReplyErrorCarriesDetail(t *testing.T) {
	data, _ := proto.Marshal(&pb.ErrorDetail{Message: "tables are at version 3, not 2: stale file handle"})
	err := replyError(syscall.ESTALE, data)
	var d *DetailError
	if !errors.As(err, &d) || !errors.Is(err, syscall.ESTALE) || !strings.Contains(err.Error(), "version 3, not 2") {
		t.Fatalf("replyError = %v (%T), want a DetailError around ESTALE with the message", err, err)
	}
	if err := replyError(syscall.ENOENT, nil); err != syscall.ENOENT {
		t.Fatalf("replyError without a payload = %v, want the bare errno", err)
	}
}

// FuzzReplyError feeds arbitrary error payloads, as a server could send
// them: no panic, and the errno always survives.
func FuzzReplyError(f *testing.F) {
	d, _ := proto.Marshal(&pb.ErrorDetail{Message: "x"})
	f.Add(uint16(syscall.EINVAL), d)
	f.Add(uint16(syscall.ENOENT), []byte{0x0a, 0xff})
	f.Add(uint16(1), []byte{})
	f.Fuzz(func(t *testing.T, status uint16, payload []byte) {
		errno := syscall.Errno(max(status, 1))
		err := replyError(errno, payload)
		if !errors.Is(err, errno) {
			t.Fatalf("replyError(%d, %x) = %v, loses the errno", errno, payload, err)
		}
	})
}
