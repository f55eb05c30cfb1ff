package server

import (
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// dispatchQuota applies the directory quota calls (QUOTA_SET to
// QUOTA_REPAIR; see docs/engine.md). Like every dispatch it runs on the
// apply loop only.
func dispatchQuota(e *engine.Engine, c engine.Cred, m pb.Method, req proto.Message) (proto.Message, error) {
	if m == pb.Method_QUOTA_SET {
		r := req.(*pb.QuotaSetRequest)
		ino, err := node(e, c, r.Ino, r.Path, true)
		if err != nil {
			return nil, err
		}
		q, err := e.SetQuota(c, ino, r.MaxFiles, r.MaxBytes)
		if err != nil {
			return nil, err
		}
		return &pb.QuotaReply{Quota: quotaPB(e, q)}, nil
	}
	r := req.(*pb.NodeRequest)
	ino, err := node(e, c, r.Ino, r.Path, true)
	if err != nil {
		return nil, err
	}
	switch m {
	case pb.Method_QUOTA_GET:
		q, err := e.GetQuota(ino)
		if err != nil {
			return nil, err
		}
		return &pb.QuotaReply{Quota: quotaPB(e, q)}, nil
	case pb.Method_QUOTA_REMOVE:
		return nil, e.RemoveQuota(c, ino)
	case pb.Method_QUOTA_LIST:
		if _, err := e.GetAttr(ino); err != nil {
			return nil, err
		}
		qs := e.Quotas()
		out := &pb.QuotaListReply{Quotas: make([]*pb.Quota, len(qs))}
		for i, q := range qs {
			out.Quotas[i] = quotaPB(e, q)
		}
		return out, nil
	case pb.Method_QUOTA_CHECK, pb.Method_QUOTA_REPAIR:
		if _, err := e.GetAttr(ino); err != nil {
			return nil, err
		}
		n := uint32(len(e.Quotas()))
		var bad []engine.QuotaMismatch
		if m == pb.Method_QUOTA_REPAIR {
			bad, err = e.RepairQuotas(c)
		} else {
			bad, err = e.CheckQuotas()
		}
		if err != nil {
			return nil, err
		}
		out := &pb.QuotaCheckReply{Quotas: n}
		for _, b := range bad {
			q := engine.Quota{QuotaLimit: engine.QuotaLimit{Dir: b.Dir}, Files: b.Files, Bytes: b.Bytes}
			if lim, err := e.GetQuota(b.Dir); err == nil {
				q.QuotaLimit = lim.QuotaLimit
			}
			out.Mismatches = append(out.Mismatches, &pb.QuotaMismatch{
				Quota: quotaPB(e, q), CountFiles: b.CountFiles, CountBytes: b.CountBytes,
			})
		}
		return out, nil
	}
	return nil, syscall.ENOSYS
}

// statfsReply answers STATFS: for a node below a directory quota, the
// nearest quota's limits and usage, as df shows them there; for the root
// or a call naming no node, the partition's figures (a router adds those
// up over the partitions).
func statfsReply(e *engine.Engine, c engine.Cred, req proto.Message) *pb.StatfsReply {
	s := e.Statfs()
	if r, ok := req.(*pb.NodeRequest); ok && (r.Ino != 0 || r.Path != "") {
		if ino, err := node(e, c, r.Ino, r.Path, !r.Nofollow); err == nil && ino != e.Root() {
			s = e.StatfsAt(ino)
		}
	}
	out := &pb.StatfsReply{
		TotalBytes: s.TotalBytes, UsedBytes: s.UsedBytes, TotalInodes: s.TotalInodes,
		UsedInodes: s.UsedInodes, BlockSize: s.BlockSize, MaxName: s.MaxName,
	}
	out.TrashFiles, out.TrashBytes = e.TrashUsage()
	return out
}

func quotaPB(e *engine.Engine, q engine.Quota) *pb.Quota {
	p, _ := e.DirPath(q.Dir)
	return &pb.Quota{Dir: uint64(q.Dir), Path: p, MaxFiles: q.MaxFiles, MaxBytes: q.MaxBytes, Files: q.Files, Bytes: q.Bytes}
}
