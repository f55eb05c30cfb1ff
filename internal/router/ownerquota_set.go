package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// setAttempts bounds how often a namespace quota set starts over because
// usage grew in a partition between reading it and setting its share.
const setAttempts = 3

// setOwnerQuota sets kind and id's quota for the whole namespace: it
// splits the limits into one share for each mounted partition (ownerquota.go).
// The limits are in a share's terms: engine.NoShareLimit for none, and 0
// is a limit of nothing (a sum of shares that allow nothing more than
// their usage, as a spread may set again). The caller holds r.quotaSets.
// A partition without a share gets one first that allows nothing more
// than what the id holds there. Shares go down before any goes up, so the
// partitions never allow more than the larger of the old and the new
// limits between them. A set that fails removes the shares it made,
// unless keepMade (a partition with a share that allows nothing more is
// better than one without a limit).
func (r *Router) setOwnerQuota(ctx context.Context, v *view, cred rpc.Cred, kind, id uint32, maxFiles, maxBytes uint64, keepMade bool) (uint32, []byte, string) {
	if kind != uint32(engine.QuotaUser) && kind != uint32(engine.QuotaGroup) {
		return uint32(syscall.EINVAL), nil, ""
	}
	var made []uint16 // the partitions given a share by this call
	for attempt := 0; ; attempt++ {
		shares, err := r.ownerShares(ctx, v, cred, kind, id)
		if err == nil {
			made, err = r.makeShares(ctx, v, cred, kind, id, shares, made)
		}
		var files, bytes []uint64
		if err == nil {
			files, err = splitLimit("files", maxFiles, shares, func(q *pb.OwnerQuota) uint64 { return q.Files })
		}
		if err == nil {
			bytes, err = splitLimit("bytes", maxBytes, shares, func(q *pb.OwnerQuota) uint64 { return q.Bytes })
		}
		if err == nil {
			err = r.applyShares(ctx, v, cred, kind, id, shares, files, bytes)
			if errors.Is(err, syscall.EDQUOT) && attempt+1 < setAttempts {
				continue // usage grew under a share: read it again
			}
		}
		if err != nil {
			if !keepMade {
				r.dropShares(v, cred, kind, id, made)
			}
			return errReply(err)
		}
		break
	}
	shares, err := r.ownerShares(ctx, v, cred, kind, id)
	if err != nil {
		return errReply(err)
	}
	out, _ := proto.Marshal(&pb.OwnerQuotaReply{Quota: sumShares(shares)})
	return 0, out, ""
}

// makeShares gives each partition of shares that has none a share that
// allows nothing more than what the id holds there (its usage), and
// returns made with those partitions added.
func (r *Router) makeShares(ctx context.Context, v *view, cred rpc.Cred, kind, id uint32, shares []ownerShare, made []uint16) ([]uint16, error) {
	for i := range shares {
		if shares[i].q != nil {
			continue
		}
		var rep pb.OwnerQuotaReply
		vp := shares[i].vp
		req := &pb.OwnerQuotaSetRequest{Ino: protocol.RootIno(vp), Kind: kind, Id: id, NewShare: true}
		status, detail, err := r.partCall(ctx, v, vp, pb.Method_OWNER_QUOTA_SET, cred, req, &rep)
		if err == nil && status != 0 {
			err = statusErr(status, detail, vp)
		}
		if err != nil {
			return made, err
		}
		q := rep.Quota
		shares[i].q = q
		made = append(made, shares[i].vp)
	}
	return made, nil
}

// dropShares removes the shares a failed set made, so that no partition
// is left without a limit by it. It runs past the call's own deadline.
func (r *Router) dropShares(v *view, cred rpc.Cred, kind, id uint32, made []uint16) {
	ctx, cancel := context.WithTimeout(r.ctx, XRenameSpan)
	defer cancel()
	for _, vp := range made {
		req := &pb.OwnerQuotaRequest{Ino: protocol.RootIno(vp), Kind: kind, Id: id}
		if status, detail, err := r.partCall(ctx, v, vp, pb.Method_OWNER_QUOTA_REMOVE, cred, req, nil); err != nil || status != 0 {
			r.log.Warn("a share of a quota whose set failed is left", "vpart", vp, "kind", kind, "id", id, "status", status, "detail", detail, "err", err)
		}
	}
}

// setShare sets partition vp's share of kind and id's quota.
func (r *Router) setShare(ctx context.Context, v *view, cred rpc.Cred, vp uint16, kind, id uint32, files, bytes uint64) (*pb.OwnerQuota, error) {
	var rep pb.OwnerQuotaReply
	req := &pb.OwnerQuotaSetRequest{Ino: protocol.RootIno(vp), Kind: kind, Id: id, MaxFiles: files, MaxBytes: bytes, Share: true}
	status, detail, err := r.partCall(ctx, v, vp, pb.Method_OWNER_QUOTA_SET, cred, req, &rep)
	if err != nil {
		return nil, err
	}
	if status != 0 {
		return nil, statusErr(status, detail, vp)
	}
	return rep.Quota, nil
}

// splitLimit splits limit (engine.NoShareLimit: none) into one share for
// each of shares: what the partition uses and an equal part of the rest
// (no limit: engine.NoShareLimit in each). A limit below the usage is
// EDQUOT.
func splitLimit(what string, limit uint64, shares []ownerShare, used func(*pb.OwnerQuota) uint64) ([]uint64, error) {
	out := make([]uint64, len(shares))
	if limit == engine.NoShareLimit {
		for i := range out {
			out[i] = engine.NoShareLimit
		}
		return out, nil
	}
	var inUse uint64
	for i, s := range shares {
		out[i] = used(s.q)
		inUse += out[i]
	}
	if inUse > limit {
		return nil, fmt.Errorf("quota below usage: %d %s in use across %d partitions: %w", inUse, what, len(shares), syscall.EDQUOT)
	}
	rest := limit - inUse
	n := uint64(len(shares))
	for i := range out {
		out[i] += rest / n
		if uint64(i) < rest%n {
			out[i]++
		}
	}
	return out, nil
}

// limitOf is a quota's limit as a share's: engine.NoShareLimit for none
// (a partition's own quota has 0 for none).
func limitOf(q *pb.OwnerQuota, limit uint64) uint64 {
	if !q.Share && limit == 0 {
		return engine.NoShareLimit
	}
	return limit
}

// applyShares sets the new shares in two passes: first each partition to
// the stricter of its old and new limits, then to the new ones, so that
// no limit goes up before every one that goes down has. A partition's own
// quota becomes a share.
func (r *Router) applyShares(ctx context.Context, v *view, cred rpc.Cred, kind, id uint32, shares []ownerShare, files, bytes []uint64) error {
	for pass := range 2 {
		for i, s := range shares {
			f, b := min(limitOf(s.q, s.q.MaxFiles), files[i]), min(limitOf(s.q, s.q.MaxBytes), bytes[i])
			if pass == 1 {
				f, b = files[i], bytes[i]
			}
			if pass == 0 && s.q.Share && f == s.q.MaxFiles && b == s.q.MaxBytes {
				continue // the second pass sets every share: each partition checks the caller
			}
			q, err := r.setShare(ctx, v, cred, s.vp, kind, id, f, b)
			if err != nil {
				return err
			}
			shares[i].q = q
		}
	}
	return nil
}

// newlyMounted lists the virtual partitions v mounts and routes that old
// did not.
func newlyMounted(old, v *view) []uint16 {
	var out []uint16
	for vp := range v.mounted {
		if v.mounted[vp] && v.parts[vp] != nil && !(old.mounted[vp] && old.parts[vp] != nil) {
			out = append(out, uint16(vp))
		}
	}
	return out
}

// spreadOwnerQuotas gives the partitions that v newly mounts their shares
// of the user and group quotas the root partition holds: each such quota
// is set again, at the limits its shares add up to. It runs on a
// goroutine of its own, started when v is installed.
// A partition that is still being dialed is tried again, with backoff,
// for as long as spanTimeout allows.
func (r *Router) spreadOwnerQuotas(v *view, newly []uint16) {
	ctx, cancel := context.WithTimeout(r.ctx, spanTimeout)
	defer cancel()
	wait := 10 * time.Millisecond
	for {
		err := r.spreadOnce(ctx, v)
		if err == nil {
			return
		}
		if !errors.Is(err, errNotReached) || ctx.Err() != nil {
			r.log.Warn("quotas not spread to newly mounted partitions", "vparts", newly, "err", err)
			return
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		wait = min(2*wait, time.Second)
	}
}

// spreadOnce sets every quota of the root partition that some partition
// of v has no share of again. An error is the first quota's that failed.
// It holds r.quotaSets throughout, so it never sees a set of this router
// half made (shares in some partitions only) and takes it for a quota to
// spread.
func (r *Router) spreadOnce(ctx context.Context, v *view) error {
	r.quotaSets.Lock()
	defer r.quotaSets.Unlock()
	var rep pb.OwnerQuotaListReply
	status, detail, err := r.partCall(ctx, v, 0, pb.Method_OWNER_QUOTA_LIST, rpc.Cred{}, &pb.OwnerQuotaRequest{Ino: protocol.RootIno(0)}, &rep)
	if err != nil {
		return err
	}
	if status != 0 {
		return statusErr(status, detail, 0)
	}
	var first error
	for _, q := range rep.Quotas {
		shares, err := r.ownerShares(ctx, v, rpc.Cred{}, q.Kind, q.Id)
		if err == nil && !slices.ContainsFunc(shares, func(s ownerShare) bool { return s.q == nil }) {
			continue // spread already (by another router)
		}
		if err == nil {
			sum := addShares(shares) // in a share's terms: a sum of 0 is no room, not no limit
			status, reply, detail := r.setOwnerQuota(ctx, v, rpc.Cred{}, q.Kind, q.Id, sum.MaxFiles, sum.MaxBytes, true)
			switch {
			case detail != "":
				err = fmt.Errorf("%s: %w", detail, errNotReached)
			case status != 0:
				var d pb.ErrorDetail
				_ = proto.Unmarshal(reply, &d)
				err = fmt.Errorf("%s: %w", d.Message, syscall.Errno(status))
			}
		}
		if err != nil && first == nil {
			first = fmt.Errorf("kind %d id %d: %w", q.Kind, q.Id, err)
		}
	}
	return first
}
