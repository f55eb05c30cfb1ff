package router

import (
	"cmp"
	"context"
	"slices"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// ownerRefusal returns the user or group quota an EDQUOT reply names, or
// nil if none does (a directory quota refused the call).
func ownerRefusal(reply []byte) *pb.ErrorDetail {
	var d pb.ErrorDetail
	if len(reply) == 0 || proto.Unmarshal(reply, &d) != nil || d.QuotaKind == 0 {
		return nil
	}
	return &d
}

// moveAndRetry moves unused limits of the quota ref names to partition vp
// and serves call rc again; if nothing could move, the call's EDQUOT is
// its reply. It runs on a goroutine of its own.
func (r *Router) moveAndRetry(rc reqCall, vp uint16, ref *pb.ErrorDetail) {
	r.slow.Add(1)
	go func() {
		defer r.slow.Done()
		ctx, cancel := context.WithTimeout(r.ctx, XRenameSpan)
		defer cancel()
		v := r.view.Load()
		if !r.moveLimits(ctx, v, vp, ref) {
			out, _ := proto.Marshal(ref)
			r.reply(&rc, uint32(syscall.EDQUOT), out)
			return
		}
		rc.moves++
		rc.offReader = true
		r.route(&rc, v, pb.Method(rc.c.Method))
	}()
}

// unused is what a share can give: its limit less what the partition
// uses; nothing without a limit.
func unused(limit, used uint64) uint64 {
	if limit == engine.NoShareLimit || limit <= used {
		return 0
	}
	return limit - used
}

// shortBy is how much more than its limit a share needs for a change that
// adds more (0: it fits, or there is no limit).
func shortBy(limit, used, more uint64) uint64 {
	if limit == engine.NoShareLimit || more == 0 || used+more <= limit {
		return 0
	}
	return used + more - limit
}

// moveLimits moves unused limits of the quota ref names from the other
// partitions to vp: what the refused change lacks, and at least half of
// what the others leave unused, so that the next refusals are rarer. Each
// giving partition lowers its share first (refusing to go below its
// usage); vp raises its own by what the others gave. It reports whether
// vp's share grew. It acts as the router itself: the moves keep the
// namespace's limit.
func (r *Router) moveLimits(ctx context.Context, v *view, vp uint16, ref *pb.ErrorDetail) bool {
	cred := rpc.Cred{}
	shares, err := r.ownerShares(ctx, v, cred, ref.QuotaKind, ref.QuotaId)
	if err != nil {
		r.log.Debug("quota move: shares", "err", err)
		return false
	}
	i := slices.IndexFunc(shares, func(s ownerShare) bool { return s.vp == vp })
	if i < 0 || shares[i].q == nil || !shares[i].q.Share {
		return false // a partition's own quota: nothing to move
	}
	at := shares[i].q
	needFiles := shortBy(at.MaxFiles, at.Files, ref.QuotaFiles)
	needBytes := shortBy(at.MaxBytes, at.Bytes, ref.QuotaBytes)
	var freeFiles, freeBytes uint64
	for _, s := range shares {
		if s.vp != vp && s.q != nil && s.q.Share {
			freeFiles += unused(s.q.MaxFiles, s.q.Files)
			freeBytes += unused(s.q.MaxBytes, s.q.Bytes)
		}
	}
	if freeFiles < needFiles || freeBytes < needBytes || needFiles == 0 && needBytes == 0 {
		return false // the namespace is full (or vp no longer short)
	}
	wantFiles, wantBytes := uint64(0), uint64(0)
	if needFiles > 0 {
		wantFiles = max(needFiles, (freeFiles+1)/2)
	}
	if needBytes > 0 {
		wantBytes = max(needBytes, (freeBytes+1)/2)
	}
	// The most unused first.
	slices.SortFunc(shares, func(a, b ownerShare) int { return cmpUnused(b, a) })
	var gotFiles, gotBytes uint64
	for _, s := range shares {
		if s.vp == vp || s.q == nil || !s.q.Share || gotFiles >= wantFiles && gotBytes >= wantBytes {
			continue
		}
		f := min(unused(s.q.MaxFiles, s.q.Files), wantFiles-min(gotFiles, wantFiles))
		b := min(unused(s.q.MaxBytes, s.q.Bytes), wantBytes-min(gotBytes, wantBytes))
		if f == 0 && b == 0 {
			continue
		}
		if err := r.adjustShare(ctx, v, cred, s.vp, ref, -int64(f), -int64(b)); err != nil {
			r.log.Debug("quota move: give", "vpart", s.vp, "err", err)
			continue // its usage grew; the others may give
		}
		gotFiles += f
		gotBytes += b
	}
	if gotFiles == 0 && gotBytes == 0 {
		return false
	}
	if err := r.adjustShare(ctx, v, cred, vp, ref, int64(gotFiles), int64(gotBytes)); err != nil {
		// What was given is out of the namespace until the quota is set
		// again: less to give out, never more.
		r.log.Warn("quota move: the taking partition did not take what was given", "vpart", vp,
			"kind", ref.QuotaKind, "id", ref.QuotaId, "files", gotFiles, "bytes", gotBytes, "err", err)
		return false
	}
	return true
}

// cmpUnused orders shares by what they can give, files first.
func cmpUnused(a, b ownerShare) int {
	give := func(s ownerShare) (files, bytes uint64) {
		if s.q == nil {
			return 0, 0
		}
		return unused(s.q.MaxFiles, s.q.Files), unused(s.q.MaxBytes, s.q.Bytes)
	}
	fa, ba := give(a)
	fb, bb := give(b)
	if c := cmp.Compare(fa, fb); c != 0 {
		return c
	}
	return cmp.Compare(ba, bb)
}

// adjustShare moves partition vp's share of the quota ref names by files
// and bytes.
func (r *Router) adjustShare(ctx context.Context, v *view, cred rpc.Cred, vp uint16, ref *pb.ErrorDetail, files, bytes int64) error {
	req := &pb.OwnerQuotaAdjustRequest{Ino: protocol.RootIno(vp), Kind: ref.QuotaKind, Id: ref.QuotaId, Files: files, Bytes: bytes}
	status, detail, err := r.partCall(ctx, v, vp, pb.Method_OWNER_QUOTA_ADJUST, cred, req, nil)
	if err != nil {
		return err
	}
	if status != 0 {
		return statusErr(status, detail, vp)
	}
	return nil
}
