package server

import (
	"math"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// dispatchTrash applies the trash calls (TRASH_LIST to TRASH_PURGE; see
// docs/engine.md). Like every dispatch it runs on the apply loop only.
func dispatchTrash(e *engine.Engine, c engine.Cred, m pb.Method, req proto.Message, now int64) (proto.Message, error) {
	switch m {
	case pb.Method_TRASH_LIST:
		r := req.(*pb.NodeRequest)
		if _, err := node(e, c, r.Ino, r.Path, true); err != nil {
			return nil, err
		}
		if !c.IsRoot() {
			return nil, syscall.EPERM
		}
		out := &pb.TrashListReply{Days: uint32(e.TrashDays())}
		for _, t := range e.TrashList() {
			a := t.Attr
			out.Entries = append(out.Entries, &pb.TrashEntry{
				Hour: t.Hour, Name: t.Name, Ino: uint64(t.Ino), Parent: uint64(t.Parent), Orig: t.Orig,
				Path: t.Path, Attr: toPB(&a), Files: t.Files, Bytes: t.Bytes,
			})
			out.Files += t.Files
			out.Bytes += t.Bytes
		}
		return out, nil
	case pb.Method_TRASH_RESTORE:
		r := req.(*pb.TrashRestoreRequest)
		if _, err := node(e, c, r.Ino, r.Path, true); err != nil {
			return nil, err
		}
		var paths []string
		var err error
		if r.Name == "" {
			paths, err = e.TrashRestoreHour(c, r.Hour, now)
		} else {
			paths, err = e.TrashRestore(c, r.Hour, r.Name, now)
		}
		// A failure changes nothing only when nothing was restored; a
		// partial restore is a change, logged as one, that says what stayed.
		if err != nil && len(paths) == 0 {
			return nil, err
		}
		out := &pb.TrashRestoreReply{Paths: paths}
		if err != nil {
			out.Failed = err.Error()
		}
		return out, nil
	case pb.Method_TRASH_PURGE:
		r := req.(*pb.TrashPurgeRequest)
		if _, err := node(e, c, r.Ino, r.Path, true); err != nil {
			return nil, err
		}
		before := int64(math.MaxInt64)
		if !r.All {
			if r.OlderThanNs < 0 {
				return nil, syscall.EINVAL
			}
			before = now - r.OlderThanNs
		}
		files, bytes, err := e.TrashPurge(c, before, now)
		if err != nil && files == 0 {
			return nil, err // nothing freed: nothing changed
		}
		return &pb.TrashPurgeReply{Files: files, Bytes: bytes}, nil
	}
	return nil, syscall.ENOSYS
}

// collectTrash runs the trash's collector at time now. An hour it could
// not free stays for a later operation; what it freed is the same on
// every replica, which apply the same records.
func collectTrash(e *engine.Engine, now int64) {
	_, _, _ = e.ExpireTrash(now)
}
