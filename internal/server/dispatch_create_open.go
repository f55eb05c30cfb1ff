package server

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// dispatchCreateOpen applies CREATE_OPEN: MKNOD of a regular file and the
// OPEN that completes it (O_CREAT), answered with the new file's
// attributes and its parent's. It is a session method: the apply loop
// counts the open against the client (state.go), as for OPEN, and the
// client ends it with CLOSE.
func dispatchCreateOpen(e *engine.Engine, c engine.Cred, r *pb.CreateRequest, now int64) (proto.Message, error) {
	parent, name, err := entry(e, c, r.Parent, r.Path, r.Name)
	if err != nil {
		return nil, err
	}
	a, dir, err := e.CreateOpen(c, parent, name, r.Mode, r.Umask, r.OpenFlags, now)
	if err != nil {
		return nil, err
	}
	return &pb.AttrReply{Attr: toPB(&a), Parent: toPB(&dir)}, nil
}
