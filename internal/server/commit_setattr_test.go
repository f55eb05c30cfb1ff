package server

import (
	"log/slog"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
)

// TestCommitSetAttrOverRPCAndRecovery: COMMIT_SETATTR commits a file's
// bytes and sets its mode, owner and times in one logged change, which
// recovery replays to the same file; one whose SETATTR is refused
// commits nothing either.
func TestCommitSetAttrOverRPCAndRecovery(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), CheckpointEvery: 1000, Logger: slog.New(slog.DiscardHandler)}
	srv, addr := openAndServe(t, cfg)
	c := dialRaw(t, addr)
	ino := c.create("/f")
	var al pb.AllocSlicesReply
	c.must(pb.Method_ALLOC_SLICES, &pb.AllocSlicesRequest{Ino: ino, Count: 2}, &al)
	write := func(id uint64) []*pb.SliceWrite {
		return []*pb.SliceWrite{{Slice: &pb.Slice{Id: id, Size: 5, Len: 5}, Data: []byte("hello")}}
	}
	attrs := &pb.SetattrRequest{
		Valid: uint32(pb.SetattrMask_SETATTR_MODE | pb.SetattrMask_SETATTR_UID | pb.SetattrMask_SETATTR_GID | pb.SetattrMask_SETATTR_MTIME),
		Mode:  0o640, Uid: 7, Gid: 8, MtimeNs: 1e18,
	}
	var r pb.AttrReply
	c.must(pb.Method_COMMIT_SETATTR, &pb.CommitRequest{Ino: ino, Writes: write(al.First), Size: 5, Attrs: attrs}, &r)
	if a := r.Attr; a.Size != 5 || a.Mode&0o7777 != 0o640 || a.Uid != 7 || a.Gid != 8 || a.MtimeNs != 1e18 {
		t.Fatalf("COMMIT_SETATTR answered %v", a)
	}
	// Without attributes the call is malformed; a refused SETATTR (the
	// caller is not the owner now) refuses the commit too.
	if st := c.call(pb.Method_COMMIT_SETATTR, &pb.CommitRequest{Ino: ino, Writes: write(al.First + 1), Size: 5}, nil); st != syscall.EINVAL {
		t.Fatalf("COMMIT_SETATTR without attributes: %v, want EINVAL", st)
	}
	data, err := proto.Marshal(&pb.CommitRequest{Ino: ino, Writes: write(al.First + 1), Size: 10,
		Attrs: &pb.SetattrRequest{Valid: uint32(pb.SetattrMask_SETATTR_MODE), Mode: 0o777}})
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := c.c.Call(t.Context(), uint16(pb.Method_COMMIT_SETATTR), rpc.Cred{UID: 1000, GID: 1000}, data)
	if err != nil || syscall.Errno(st) != syscall.EPERM {
		t.Fatalf("COMMIT_SETATTR by another user: %v %v, want EPERM", syscall.Errno(st), err)
	}
	srv.Close()
	for _, e := range []*engine.Engine{srv.apply.state.eng, recoveredEngine(t, cfg)} {
		a, err := e.GetAttr(engine.Ino(ino))
		if err != nil || a.Size != 5 || a.Mode&0o7777 != 0o640 || a.UID != 7 || a.GID != 8 || a.Mtime != 1e18 {
			t.Fatalf("after the calls: %+v %v", a, err)
		}
	}
}
