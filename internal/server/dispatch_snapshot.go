package server

import (
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// dispatchSnapshot applies the snapshot and clone calls (SNAPSHOT_CREATE
// to CLONE; see docs/snapshots.md). Like every dispatch it runs on the
// apply loop only.
func dispatchSnapshot(e *engine.Engine, c engine.Cred, m pb.Method, req proto.Message, now int64) (proto.Message, error) {
	switch m {
	case pb.Method_SNAPSHOT_CREATE:
		r := req.(*pb.SnapshotRequest)
		dir, err := node(e, c, r.Ino, r.Path, true)
		if err != nil {
			return nil, err
		}
		info, err := e.SnapshotCreate(c, dir, r.Name, now)
		if err != nil {
			return nil, err
		}
		return &pb.SnapshotReply{Snapshot: snapshotPB(info)}, nil
	case pb.Method_SNAPSHOT_LIST:
		r := req.(*pb.NodeRequest)
		dir, err := node(e, c, r.Ino, r.Path, true)
		if err != nil {
			return nil, err
		}
		list, err := e.SnapshotList(dir)
		if err != nil {
			return nil, err
		}
		out := &pb.SnapshotListReply{}
		for _, s := range list {
			out.Snapshots = append(out.Snapshots, snapshotPB(s))
		}
		return out, nil
	case pb.Method_SNAPSHOT_REMOVE:
		r := req.(*pb.SnapshotRequest)
		dir, err := node(e, c, r.Ino, r.Path, true)
		if err != nil {
			return nil, err
		}
		return &pb.Empty{}, e.SnapshotRemove(c, dir, r.Name, now)
	case pb.Method_SNAPSHOT_DIFF:
		r := req.(*pb.SnapshotDiffRequest)
		dir, err := node(e, c, r.Ino, r.Path, true)
		if err != nil {
			return nil, err
		}
		changes, truncated, err := e.SnapshotDiff(c, dir, r.Name, r.Name2)
		if err != nil {
			return nil, err
		}
		out := &pb.SnapshotDiffReply{Truncated: truncated, Changes: make([]*pb.SnapshotChange, len(changes))}
		for i, ch := range changes {
			out.Changes[i] = &pb.SnapshotChange{Op: string(ch.Op), Path: ch.Path, Type: ch.Type}
		}
		return out, nil
	case pb.Method_CLONE:
		r := req.(*pb.CloneRequest)
		src, err := node(e, c, r.Ino, r.Path, false)
		if err != nil {
			return nil, err
		}
		newParent, newName, err := entry(e, c, r.NewParent, r.NewPath, r.NewName)
		if err != nil {
			return nil, err
		}
		return attrReply(e.Clone(c, src, newParent, newName, now))
	}
	return nil, syscall.ENOSYS
}

// snapshotPB is s on the wire.
func snapshotPB(s engine.SnapshotInfo) *pb.SnapshotInfo {
	return &pb.SnapshotInfo{
		Name: s.Name, Dir: uint64(s.Dir), Ino: uint64(s.Ino), CreatedNs: s.Created, Nodes: s.Nodes, Bytes: s.Bytes,
	}
}
