package server

import (
	"log/slog"
	"syscall"
	"testing"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// CREATE_OPEN creates a file and opens it for its creator in one logged
// change: the reply carries the file's and the parent's attributes, the
// open is counted for the client (CLOSE by another client is EBADF, and
// the file outlives its unlink until CLOSE), a mode of 0 does not stop
// the creator's open for writing, a failure (EEXIST, a bad mode or access
// mode) changes nothing, and a restart replays it to the same state.
func TestCreateOpen(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
	srv, addr := openAndServe(t, cfg)
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	var root pb.AttrReply
	a.must(pb.Method_GETATTR, &pb.NodeRequest{Ino: 1}, &root)
	var r pb.AttrReply
	syncs := srv.Stats().Syncs
	a.must(pb.Method_CREATE_OPEN, &pb.CreateRequest{Parent: 1, Name: "f", Mode: engine.S_IFREG, OpenFlags: uint32(syscall.O_WRONLY)}, &r)
	ino := r.Attr.GetIno()
	// Not early: the create is answered once durable, as MKNOD is.
	if srv.Stats().Syncs == syncs {
		t.Fatal("CREATE_OPEN was answered before any log fsync")
	}
	if r.Attr.Mode != engine.S_IFREG || r.Parent.GetIno() != 1 || r.Parent.MtimeNs < root.Attr.MtimeNs || r.Parent.MtimeNs != r.Attr.CtimeNs {
		t.Fatalf("reply %v, want a file of mode 0 and the root's attributes after the create", &r)
	}
	var now pb.AttrReply
	a.must(pb.Method_GETATTR, &pb.NodeRequest{Ino: 1}, &now)
	if now.Attr.MtimeNs != r.Parent.MtimeNs || now.Attr.CtimeNs != r.Parent.CtimeNs {
		t.Fatalf("parent in the reply %v, GETATTR %v", r.Parent, now.Attr)
	}
	for _, bad := range []*pb.CreateRequest{
		{Parent: 1, Name: "f", Mode: engine.S_IFREG | 0o644, OpenFlags: uint32(syscall.O_RDWR)},     // exists
		{Parent: 1, Name: "g", Mode: engine.S_IFDIR | 0o755, OpenFlags: uint32(syscall.O_RDWR)},     // not a file
		{Parent: 1, Name: "g", Mode: engine.S_IFREG | 0o644, OpenFlags: uint32(syscall.O_ACCMODE)},  // no access mode
		{Parent: ino, Name: "g", Mode: engine.S_IFREG | 0o644, OpenFlags: uint32(syscall.O_WRONLY)}, // parent not a directory
	} {
		if errno := a.call(pb.Method_CREATE_OPEN, bad, nil); errno == 0 {
			t.Fatalf("CREATE_OPEN %v succeeded", bad)
		}
	}
	if errno := a.call(pb.Method_LOOKUP, &pb.EntryRequest{Parent: 1, Name: "g"}, nil); errno != syscall.ENOENT {
		t.Fatalf("a failed CREATE_OPEN left g: %v", errno)
	}
	if errno := b.call(pb.Method_CLOSE, &pb.NodeRequest{Ino: ino}, nil); errno != syscall.EBADF {
		t.Fatalf("CLOSE by another client: %v, want EBADF", errno)
	}
	// Open for its creator: unlinked, the file stays until CLOSE.
	b.must(pb.Method_UNLINK, &pb.EntryRequest{Parent: 1, Name: "f"}, nil)
	if errno := b.call(pb.Method_GETATTR, &pb.NodeRequest{Ino: ino}, nil); errno != 0 {
		t.Fatalf("the unlinked open file is gone: %v", errno)
	}
	a.must(pb.Method_CLOSE, &pb.NodeRequest{Ino: ino}, nil)
	if errno := b.call(pb.Method_GETATTR, &pb.NodeRequest{Ino: ino}, nil); errno != syscall.ENOENT {
		t.Fatalf("getattr after the last CLOSE: %v, want ENOENT", errno)
	}
	// Replayed after a restart: a second file, still open, then the
	// server closes and reopens from its log.
	a.must(pb.Method_CREATE_OPEN, &pb.CreateRequest{Parent: 1, Name: "h", Mode: engine.S_IFREG | 0o600, OpenFlags: uint32(syscall.O_RDWR)}, &r)
	h := r.Attr.GetIno()
	srv.Close()
	_, addr = openAndServe(t, cfg)
	c := dialRaw(t, addr)
	var got pb.AttrReply
	c.must(pb.Method_LOOKUP, &pb.EntryRequest{Parent: 1, Name: "h"}, &got)
	if got.Attr.Ino != h || got.Attr.Mode != engine.S_IFREG|0o600 {
		t.Fatalf("after the restart: %v, want ino %d mode 0600", got.Attr, h)
	}
	if errno := c.call(pb.Method_LOOKUP, &pb.EntryRequest{Parent: 1, Name: "f"}, nil); errno != syscall.ENOENT {
		t.Fatalf("f after the restart: %v, want ENOENT", errno)
	}
}
