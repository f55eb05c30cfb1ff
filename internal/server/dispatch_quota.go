package server

import (
	"fmt"
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

// dispatchOwnerQuota applies the user and group quota calls
// (OWNER_QUOTA_SET to OWNER_QUOTA_REPAIR). The node the call names only
// picks the partition, but must exist. Like every dispatch it runs on the
// apply loop only.
func dispatchOwnerQuota(e *engine.Engine, c engine.Cred, m pb.Method, req proto.Message) (proto.Message, error) {
	if m == pb.Method_OWNER_QUOTA_ADJUST {
		r := req.(*pb.OwnerQuotaAdjustRequest)
		if _, err := node(e, c, r.Ino, r.Path, true); err != nil {
			return nil, err
		}
		kind, err := quotaKind(r.Kind)
		if err != nil {
			return nil, err
		}
		q, err := e.AdjustOwnerQuota(kind, r.Id, r.Files, r.Bytes)
		if err != nil {
			return nil, err
		}
		return &pb.OwnerQuotaReply{Quota: ownerQuotaPB(q)}, nil
	}
	if m == pb.Method_OWNER_QUOTA_SET {
		r := req.(*pb.OwnerQuotaSetRequest)
		if _, err := node(e, c, r.Ino, r.Path, true); err != nil {
			return nil, err
		}
		kind, err := quotaKind(r.Kind)
		if err != nil {
			return nil, err
		}
		set := e.SetOwnerQuota
		if r.Share {
			set = e.SetOwnerQuotaShare
		}
		if r.NewShare {
			set = func(c engine.Cred, kind engine.QuotaKind, id uint32, _, _ uint64) (engine.OwnerQuota, error) {
				return e.NewOwnerQuotaShare(c, kind, id)
			}
		}
		q, err := set(c, kind, r.Id, r.MaxFiles, r.MaxBytes)
		if err != nil {
			return nil, err
		}
		return &pb.OwnerQuotaReply{Quota: ownerQuotaPB(q)}, nil
	}
	r := req.(*pb.OwnerQuotaRequest)
	if _, err := node(e, c, r.Ino, r.Path, true); err != nil {
		return nil, err
	}
	switch m {
	case pb.Method_OWNER_QUOTA_LIST:
		out := &pb.OwnerQuotaListReply{}
		if r.Kind == 0 {
			for _, q := range e.OwnerQuotas() {
				out.Quotas = append(out.Quotas, ownerQuotaPB(q))
			}
			return out, nil
		}
		kind, err := quotaKind(r.Kind)
		if err != nil {
			return nil, err
		}
		q, err := e.GetOwnerQuota(kind, r.Id)
		if err != nil {
			return nil, err
		}
		out.Quotas = append(out.Quotas, ownerQuotaPB(q))
		return out, nil
	case pb.Method_OWNER_QUOTA_REMOVE:
		kind, err := quotaKind(r.Kind)
		if err != nil {
			return nil, err
		}
		return nil, e.RemoveOwnerQuota(c, kind, r.Id)
	case pb.Method_OWNER_QUOTA_CHECK, pb.Method_OWNER_QUOTA_REPAIR:
		n := uint32(len(e.OwnerQuotas()))
		var bad []engine.OwnerQuotaMismatch
		if m == pb.Method_OWNER_QUOTA_REPAIR {
			var err error
			if bad, err = e.RepairOwnerQuotas(c); err != nil {
				return nil, err
			}
		} else {
			bad = e.CheckOwnerQuotas()
		}
		out := &pb.OwnerQuotaCheckReply{Quotas: n}
		for _, b := range bad {
			q := engine.OwnerQuota{OwnerQuotaLimit: engine.OwnerQuotaLimit{Kind: b.Kind, ID: b.ID}, Files: b.Files, Bytes: b.Bytes}
			if lim, err := e.GetOwnerQuota(b.Kind, b.ID); err == nil {
				q.OwnerQuotaLimit = lim.OwnerQuotaLimit
			}
			out.Mismatches = append(out.Mismatches, &pb.OwnerQuotaMismatch{
				Quota: ownerQuotaPB(q), CountFiles: b.CountFiles, CountBytes: b.CountBytes,
			})
		}
		return out, nil
	}
	return nil, syscall.ENOSYS
}

// withRefusal adds to the reply of a call that failed with status the
// user or group quota that refused it, if one did (a router moves unused
// limits to this partition and retries). detail is the reply so far: an
// ErrorDetail or nil.
func withRefusal(e *engine.Engine, status uint32, detail proto.Message) proto.Message {
	if status == 0 {
		return detail
	}
	r := e.TakeOwnerRefusal() // taken on every failure: never left for a later call
	if status != uint32(syscall.EDQUOT) || r.Kind == 0 {
		return detail
	}
	d, _ := detail.(*pb.ErrorDetail)
	if d == nil {
		d = &pb.ErrorDetail{Message: fmt.Sprintf("quota of %v %d: %v", r.Kind, r.ID, syscall.EDQUOT)}
	}
	d.QuotaKind, d.QuotaId = uint32(r.Kind), r.ID
	d.QuotaFiles, d.QuotaBytes = uint64(r.Files), uint64(r.Bytes)
	return d
}

// quotaKind checks a wire quota kind (EINVAL for one that is not a uid's
// or a gid's).
func quotaKind(k uint32) (engine.QuotaKind, error) {
	switch engine.QuotaKind(k) {
	case engine.QuotaUser, engine.QuotaGroup:
		return engine.QuotaKind(k), nil
	}
	return 0, syscall.EINVAL
}

func ownerQuotaPB(q engine.OwnerQuota) *pb.OwnerQuota {
	return &pb.OwnerQuota{Kind: uint32(q.Kind), Id: q.ID, MaxFiles: q.MaxFiles, MaxBytes: q.MaxBytes, Files: q.Files, Bytes: q.Bytes, Share: q.Share}
}
