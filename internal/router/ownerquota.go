package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// User and group quotas for the whole namespace. Each partition enforces
// its own limits exactly (engine/quota_owner.go); through a router a
// user's or group's quota is the namespace's, and each mounted partition
// holds a share of it: the namespace's limit is the sum of the shares, and
// its usage the sum of the partitions' usage. The router that sets a
// quota splits the limit: each partition gets what the id holds there
// and an equal part of what is left (engine/quota_owner_share.go: a share
// may be 0). A partition that
// runs short refuses the change with EDQUOT, naming the quota
// (pb.ErrorDetail); the router then moves unused limits to it from the
// other partitions, each move down in the giving partition first and up
// in the taking one after (OWNER_QUOTA_ADJUST, which refuses to go below
// what the giving partition uses), and passes the call on again. So the
// shares never add up to more than the namespace's limit, and usage never
// passes it; a move cut short between its two steps leaves the namespace
// with less to give out, never more, until the quota is set again.
//
// A partition mounted after a quota was set has no share of it (and so
// no limit there) until a router sets the quota again: every router does
// so for the quotas of the root partition when it starts and when it
// installs tables that mount a partition its last tables did not
// (spreadOwnerQuotas), for each quota some partition has no share of.

// rebalanceRounds bounds the moves one refused call makes before its
// EDQUOT is passed back: with writers in several partitions, what one
// move brought may be used by others before the call runs again.
const rebalanceRounds = 4

// ownerShare is one partition's share of a namespace quota: nil q if the
// partition has none.
type ownerShare struct {
	vp uint16
	q  *pb.OwnerQuota
}

// mountedParts lists the virtual partitions that mount entries of v name.
func mountedParts(v *view) []uint16 {
	var out []uint16
	for vp := range v.mounted {
		if v.mounted[vp] {
			out = append(out, uint16(vp))
		}
	}
	return out
}

// spansPartitions reports whether the namespace of v is more than one
// partition: only then do the owner quota calls need the router.
func spansPartitions(v *view) bool { return len(mountedParts(v)) > 1 }

// serveOwnerQuota serves OWNER_QUOTA_SET to OWNER_QUOTA_REPAIR. A
// namespace of one partition passes them on as any call; one of several
// has them served across every partition, on a goroutine of their own.
func (r *Router) serveOwnerQuota(rc *reqCall, v *view, m pb.Method) {
	if !spansPartitions(v) {
		r.serveOne(rc, v, m)
		return
	}
	var set pb.OwnerQuotaSetRequest
	var one pb.OwnerQuotaRequest
	var err error
	if m == pb.Method_OWNER_QUOTA_SET {
		err = proto.Unmarshal(rc.c.Payload, &set)
	} else {
		err = proto.Unmarshal(rc.c.Payload, &one)
	}
	if err != nil {
		r.reply(rc, rpc.StatusMalformed, nil)
		return
	}
	cred := rc.c.Cred
	r.goSpan(rc, func(ctx context.Context) (uint32, []byte, string) {
		switch m {
		case pb.Method_OWNER_QUOTA_SET:
			files, bytes, err := shareLimits(set.MaxFiles, set.MaxBytes)
			if err != nil {
				return errReply(err)
			}
			r.quotaSets.Lock()
			defer r.quotaSets.Unlock()
			return r.setOwnerQuota(ctx, v, cred, set.Kind, set.Id, files, bytes, false)
		case pb.Method_OWNER_QUOTA_LIST:
			return r.listOwnerQuotas(ctx, v, cred, one.Kind, one.Id)
		case pb.Method_OWNER_QUOTA_REMOVE:
			return r.removeOwnerQuota(ctx, v, cred, one.Kind, one.Id)
		}
		return r.checkOwnerQuotas(ctx, v, cred, m)
	})
}

// shareLimits turns a client's limits (0: none) into a share's
// (engine.NoShareLimit: none); a client's engine.NoShareLimit is EINVAL.
func shareLimits(maxFiles, maxBytes uint64) (files, bytes uint64, err error) {
	if maxFiles == engine.NoShareLimit || maxBytes == engine.NoShareLimit {
		return 0, 0, fmt.Errorf("a limit of %d: %w", uint64(engine.NoShareLimit), syscall.EINVAL)
	}
	none := func(limit uint64) uint64 {
		if limit == 0 {
			return engine.NoShareLimit
		}
		return limit
	}
	return none(maxFiles), none(maxBytes), nil
}

// errNotReached marks a call whose partition could not be reached: the
// client is told to retry.
var errNotReached = errors.New("partition not reached")

// partCall makes call m with req at partition vp and decodes its reply
// into out (nil: none). A transport failure is errNotReached; a refusal
// is its errno, with the partition's detail.
func (r *Router) partCall(ctx context.Context, v *view, vp uint16, m pb.Method, cred rpc.Cred, req, out proto.Message) (uint32, string, error) {
	data, err := proto.Marshal(req)
	if err != nil {
		return 0, "", err
	}
	status, reply, err := r.call(ctx, v, vp, m, cred, data)
	if err != nil {
		return 0, "", fmt.Errorf("%s at vpart %d: %w: %w", m, vp, errNotReached, err)
	}
	if status != 0 {
		var d pb.ErrorDetail
		_ = proto.Unmarshal(reply, &d)
		return status, d.Message, nil
	}
	if out != nil {
		if err := proto.Unmarshal(reply, out); err != nil {
			return 0, "", fmt.Errorf("%s at vpart %d: reply: %w", m, vp, err)
		}
	}
	return 0, "", nil
}

// ownerShares returns every mounted partition's share of kind and id's
// quota.
func (r *Router) ownerShares(ctx context.Context, v *view, cred rpc.Cred, kind, id uint32) ([]ownerShare, error) {
	var out []ownerShare
	for _, vp := range mountedParts(v) {
		var rep pb.OwnerQuotaListReply
		req := &pb.OwnerQuotaRequest{Ino: protocol.RootIno(vp), Kind: kind, Id: id}
		status, detail, err := r.partCall(ctx, v, vp, pb.Method_OWNER_QUOTA_LIST, cred, req, &rep)
		switch {
		case err != nil:
			return nil, err
		case status == uint32(syscall.ENODATA):
			out = append(out, ownerShare{vp: vp})
		case status != 0:
			return nil, statusErr(status, detail, vp)
		case len(rep.Quotas) != 1:
			return nil, fmt.Errorf("vpart %d: %d quotas in the reply", vp, len(rep.Quotas))
		default:
			out = append(out, ownerShare{vp: vp, q: rep.Quotas[0]})
		}
	}
	return out, nil
}

// statusErr is a partition's refusal as an error.
func statusErr(status uint32, detail string, vp uint16) error {
	if detail == "" {
		return fmt.Errorf("vpart %d: %w", vp, syscall.Errno(status))
	}
	return fmt.Errorf("vpart %d: %s: %w", vp, detail, syscall.Errno(status))
}

// errReply turns err into a span's reply: a refusal's errno with its
// text, or (an unreachable partition) a detail that has the client retry.
func errReply(err error) (uint32, []byte, string) {
	var errno syscall.Errno
	if errors.Is(err, errNotReached) || !errors.As(err, &errno) {
		return 0, nil, err.Error()
	}
	out, _ := proto.Marshal(&pb.ErrorDetail{Message: err.Error()})
	return uint32(errno), out, ""
}

// sumShares adds the shares up into the namespace's quota: nil if no
// partition has one.
func sumShares(shares []ownerShare) *pb.OwnerQuota {
	sum := addShares(shares)
	if sum != nil {
		endSum(sum)
	}
	return sum
}

// addShares adds the shares up, keeping the limits in a share's terms
// (engine.NoShareLimit: none): nil if no partition has one.
func addShares(shares []ownerShare) *pb.OwnerQuota {
	var sum *pb.OwnerQuota
	for _, s := range shares {
		if s.q == nil {
			continue
		}
		if sum == nil {
			sum = &pb.OwnerQuota{Kind: s.q.Kind, Id: s.q.Id}
		}
		addShare(sum, s.q)
	}
	return sum
}

// addShare adds one partition's quota q to the namespace's sum, whose
// limits are kept as a share's (engine.NoShareLimit: none) until endSum.
func addShare(sum, q *pb.OwnerQuota) {
	sum.MaxFiles = addLimit(sum.MaxFiles, limitOf(q, q.MaxFiles))
	sum.MaxBytes = addLimit(sum.MaxBytes, limitOf(q, q.MaxBytes))
	sum.Files += q.Files
	sum.Bytes += q.Bytes
}

// addLimit adds two shares' limits: none if either has none.
func addLimit(a, b uint64) uint64 {
	if a == engine.NoShareLimit || b == engine.NoShareLimit || a+b < a {
		return engine.NoShareLimit
	}
	return a + b
}

// endSum turns the sum's limits into the namespace's (0: none).
func endSum(sum *pb.OwnerQuota) {
	if sum.MaxFiles == engine.NoShareLimit {
		sum.MaxFiles = 0
	}
	if sum.MaxBytes == engine.NoShareLimit {
		sum.MaxBytes = 0
	}
}

// listOwnerQuotas answers OWNER_QUOTA_LIST with the namespace's figures:
// every quota any partition holds (kind 0), or the one kind and id name.
func (r *Router) listOwnerQuotas(ctx context.Context, v *view, cred rpc.Cred, kind, id uint32) (uint32, []byte, string) {
	if kind != 0 {
		shares, err := r.ownerShares(ctx, v, cred, kind, id)
		if err != nil {
			return errReply(err)
		}
		sum := sumShares(shares)
		if sum == nil {
			return uint32(syscall.ENODATA), nil, ""
		}
		out, _ := proto.Marshal(&pb.OwnerQuotaListReply{Quotas: []*pb.OwnerQuota{sum}})
		return 0, out, ""
	}
	sums := map[[2]uint32]*pb.OwnerQuota{}
	var order [][2]uint32
	for _, vp := range mountedParts(v) {
		var rep pb.OwnerQuotaListReply
		status, detail, err := r.partCall(ctx, v, vp, pb.Method_OWNER_QUOTA_LIST, cred, &pb.OwnerQuotaRequest{Ino: protocol.RootIno(vp)}, &rep)
		if err != nil {
			return errReply(err)
		}
		if status != 0 {
			return errReply(statusErr(status, detail, vp))
		}
		for _, q := range rep.Quotas {
			k := [2]uint32{q.Kind, q.Id}
			s := sums[k]
			if s == nil {
				s = &pb.OwnerQuota{Kind: q.Kind, Id: q.Id}
				sums[k] = s
				order = append(order, k)
			}
			addShare(s, q)
		}
	}
	rep := &pb.OwnerQuotaListReply{}
	for _, k := range sortedKeys(order) {
		endSum(sums[k])
		rep.Quotas = append(rep.Quotas, sums[k])
	}
	out, _ := proto.Marshal(rep)
	return 0, out, ""
}

// sortedKeys sorts kind and id pairs as the partitions list them: users by
// uid, then groups by gid.
func sortedKeys(keys [][2]uint32) [][2]uint32 {
	out := slices.Clone(keys)
	slices.SortFunc(out, func(a, b [2]uint32) int {
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return cmp.Compare(a[1], b[1])
	})
	return out
}

// removeOwnerQuota removes the quota from every partition: ENODATA if
// none had it.
func (r *Router) removeOwnerQuota(ctx context.Context, v *view, cred rpc.Cred, kind, id uint32) (uint32, []byte, string) {
	found := false
	for _, vp := range mountedParts(v) {
		req := &pb.OwnerQuotaRequest{Ino: protocol.RootIno(vp), Kind: kind, Id: id}
		status, detail, err := r.partCall(ctx, v, vp, pb.Method_OWNER_QUOTA_REMOVE, cred, req, nil)
		switch {
		case err != nil:
			return errReply(err)
		case status == uint32(syscall.ENODATA):
		case status != 0:
			return errReply(statusErr(status, detail, vp))
		default:
			found = true
		}
	}
	if !found {
		return uint32(syscall.ENODATA), nil, ""
	}
	return 0, nil, ""
}

// checkOwnerQuotas answers OWNER_QUOTA_CHECK and OWNER_QUOTA_REPAIR with
// the namespace's figures: every partition's check, the kept and counted
// usage of each quota that is wrong somewhere added up over the
// partitions.
func (r *Router) checkOwnerQuotas(ctx context.Context, v *view, cred rpc.Cred, m pb.Method) (uint32, []byte, string) {
	type sum struct {
		q            *pb.OwnerQuota
		files, bytes uint64
		bad          bool
	}
	sums := map[[2]uint32]*sum{}
	var order [][2]uint32
	for _, vp := range mountedParts(v) {
		var rep pb.OwnerQuotaCheckReply
		status, detail, err := r.partCall(ctx, v, vp, m, cred, &pb.OwnerQuotaRequest{Ino: protocol.RootIno(vp)}, &rep)
		if err != nil {
			return errReply(err)
		}
		if status != 0 {
			return errReply(statusErr(status, detail, vp))
		}
		var list pb.OwnerQuotaListReply // the shares, for the figures of the right ones
		status, detail, err = r.partCall(ctx, v, vp, pb.Method_OWNER_QUOTA_LIST, cred, &pb.OwnerQuotaRequest{Ino: protocol.RootIno(vp)}, &list)
		if err != nil {
			return errReply(err)
		}
		if status != 0 {
			return errReply(statusErr(status, detail, vp))
		}
		wrong := map[[2]uint32]*pb.OwnerQuotaMismatch{}
		for _, b := range rep.Mismatches {
			wrong[[2]uint32{b.Quota.GetKind(), b.Quota.GetId()}] = b
		}
		for _, q := range list.Quotas {
			k := [2]uint32{q.Kind, q.Id}
			s := sums[k]
			if s == nil {
				s = &sum{q: &pb.OwnerQuota{Kind: q.Kind, Id: q.Id}}
				sums[k] = s
				order = append(order, k)
			}
			s.q.MaxFiles = addLimit(s.q.MaxFiles, limitOf(q, q.MaxFiles))
			s.q.MaxBytes = addLimit(s.q.MaxBytes, limitOf(q, q.MaxBytes))
			kept, counted := q, [2]uint64{q.Files, q.Bytes}
			if b := wrong[k]; b != nil {
				kept, counted, s.bad = b.Quota, [2]uint64{b.CountFiles, b.CountBytes}, true
			}
			s.q.Files += kept.Files
			s.q.Bytes += kept.Bytes
			s.files += counted[0]
			s.bytes += counted[1]
		}
	}
	rep := &pb.OwnerQuotaCheckReply{Quotas: uint32(len(sums))}
	for _, k := range sortedKeys(order) {
		if s := sums[k]; s.bad {
			endSum(s.q)
			rep.Mismatches = append(rep.Mismatches, &pb.OwnerQuotaMismatch{Quota: s.q, CountFiles: s.files, CountBytes: s.bytes})
		}
	}
	out, _ := proto.Marshal(rep)
	return 0, out, ""
}
