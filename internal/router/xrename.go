package router

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/mount"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Renames across partitions: the router runs the two-phase protocol of
// engine/xrename.go between the partition of the source entry (the
// coordinator of record) and that of the target, and keeps nothing of
// it: every step is logged by a partition, and any router's recovery pass
// (recoverIntents) finishes or rolls back what a router left half done.

// XRenameSpan bounds the steps one attempt of a rename across partitions
// makes: once a client's call has returned, no attempt of it goes on
// longer than this, and what is left half done is the recovery pass's.
const XRenameSpan = 10 * time.Second

// errUnsettled marks a step whose outcome the router could not learn (a
// partition unreachable): the client is told to retry, and the recovery
// pass settles the intent.
var errUnsettled = errors.New("rename across partitions: outcome not settled yet")

// xside is one entry of a rename across partitions, as the partition
// that holds it names it.
type xside struct {
	vp     uint16
	parent uint64
	path   string
	name   string
}

// mountPointsIn returns the paths, inside virtual partition vp, of the
// mount points of v's entries whose parent vp serves: a directory
// moving with one below it would take the mount point along, so the
// partition refuses it (XPrepareRequest.busy).
func mountPointsIn(v *view, vp uint16) []string {
	var out []string
	v.mounts.Entries(func(e *mount.Entry) bool {
		if e.Prefix == "/" {
			return true
		}
		pe, inner, ok := v.mounts.Lookup(path.Dir(e.Prefix))
		if ok && pe.VPart == vp {
			out = append(out, path.Join(inner, path.Base(e.Prefix)))
		}
		return true
	})
	return out
}

// targetBusy returns, for an exchange, the mount points in the target's
// partition vp (its node moves to the source too); none otherwise.
func targetBusy(v *view, vp uint16, flags uint32) []string {
	if flags&engine.RenameExchange == 0 {
		return nil
	}
	return mountPointsIn(v, vp)
}

// xcall makes one step's call and decodes its reply into out (nil: none).
// A transport failure is errUnsettled; a refusal is its errno, with the
// partition's detail.
func (r *Router) xcall(ctx context.Context, v *view, vp uint16, m pb.Method, cred rpc.Cred, req, out proto.Message) (uint32, string, error) {
	status, detail, err := r.partCall(ctx, v, vp, m, cred, req, out)
	if errors.Is(err, errNotReached) {
		err = fmt.Errorf("%w: %w", errUnsettled, err)
	}
	return status, detail, err
}

// markKey carries, in a context, how the router's calls to partitions
// made with it are to be answered (rpc.Mark); without it, as the router's
// clients are configured.
type markKey struct{}

func withMark(ctx context.Context, m rpc.Mark) context.Context {
	return context.WithValue(ctx, markKey{}, m)
}

func markIn(ctx context.Context) rpc.Mark {
	m, _ := ctx.Value(markKey{}).(rpc.Mark)
	return m
}

// xid returns the intent id of the call with id call of client: the same
// for every retry of the call, so that a retry finds what the first
// attempt did.
func xid(client rpc.ClientID, call uint64) engine.XID {
	h := sha256.New()
	h.Write([]byte("canopy xrename\x00"))
	h.Write(client[:])
	h.Write(binary.BigEndian.AppendUint64(nil, call))
	var id engine.XID
	copy(id[:], h.Sum(nil))
	return id
}

// xrename renames a (in vpart a.vp) to b (in another vpart), as the
// intent id.
func (r *Router) xrename(ctx context.Context, v *view, cred rpc.Cred, id engine.XID, a, b xside, flags uint32) (uint32, []byte, string) {
	ctx, cancel := context.WithTimeout(ctx, XRenameSpan)
	defer cancel()
	fail := func(status uint32, detail string) (uint32, []byte, string) {
		return status, detailBytes(detail), ""
	}
	unsettled := func(err error) (uint32, []byte, string) { return 0, nil, err.Error() }
	abort := func(sides ...uint16) {
		for _, vp := range sides {
			if _, _, err := r.xcall(ctx, v, vp, pb.Method_XRENAME_ABORT, cred,
				&pb.XIntentRequest{Ino: protocol.RootIno(vp), Id: id[:]}, nil); err != nil {
				r.log.Debug("abort rename across partitions", "vpart", vp, "err", err)
			}
		}
	}
	// 1. The source, answered before it is durable: the decision (3) is
	// logged after it in the same log and waits for its own fsync, so no
	// decision outlives a crash that lost its prepare (the decision then
	// finds no intent, and the attempt is aborted).
	var pa pb.XPrepareReply
	busy := mountPointsIn(v, a.vp)
	st, detail, err := r.xcall(withMark(ctx, rpc.MarkEarly), v, a.vp, pb.Method_XRENAME_PREPARE_SRC, cred, &pb.XPrepareRequest{
		Parent: a.parent, Path: a.path, Name: a.name, Id: id[:], Flags: flags, Peer: uint32(b.vp), Busy: busy}, &pa)
	if err != nil {
		return unsettled(err) // a prepared intent left behind is aborted by recovery
	}
	if st != 0 {
		return fail(st, detail)
	}
	switch pa.State { // a retry of a call that got this far before
	case engine.XDone:
		return 0, nil, ""
	case engine.XCommitted:
		return r.retryCommitted(ctx, v, cred, id, a.vp, b.vp)
	}
	// 2. The target.
	var pbr pb.XPrepareReply
	st, detail, err = r.xcall(ctx, v, b.vp, pb.Method_XRENAME_PREPARE_DST, cred, &pb.XPrepareRequest{
		Parent: b.parent, Path: b.path, Name: b.name, Id: id[:], Flags: flags, Peer: uint32(a.vp), SourceDir: pa.Dir,
		Nodes: pa.Nodes, Bytes: pa.Bytes, Busy: targetBusy(v, b.vp, flags)}, &pbr)
	if err != nil {
		abort(a.vp)
		return unsettled(err)
	}
	if st != 0 {
		abort(a.vp)
		return fail(st, detail)
	}
	// 3. The decision, at the source.
	var ca pb.XPrepareReply
	st, detail, err = r.xcall(ctx, v, a.vp, pb.Method_XRENAME_COMMIT_SRC, cred,
		&pb.XIntentRequest{Ino: protocol.RootIno(a.vp), Id: id[:], Image: pbr.Image, Busy: busy}, &ca)
	if err != nil {
		return unsettled(err) // recovery commits or aborts both sides
	}
	if st != 0 {
		abort(b.vp, a.vp)
		if st == uint32(syscall.ETIMEDOUT) { // recovery aborted it meanwhile: nothing happened
			return 0, nil, "rename across partitions: " + detail
		}
		return fail(st, detail)
	}
	if ca.Image == nil {
		// Done meanwhile by another attempt of the same call, which the
		// target committed: the target intent this attempt prepared
		// after that is a stale one.
		abort(b.vp)
		return 0, nil, ""
	}
	// 4. The target. The rename has happened; what fails here the
	// recovery pass finishes, and the client, told to retry, is answered
	// once the target has the node (retryCommitted), so that a success
	// means the node is at its new name.
	if err := r.commitTarget(ctx, v, cred, id, b.vp, ca.Image); err != nil {
		r.log.Warn("rename across partitions committed; the target is left to recovery", "err", err)
		return unsettled(err)
	}
	// 5. The source forgets, after the reply: the client waits for
	// nothing more. A source left committed is forgotten by recovery.
	r.slow.Add(1)
	go func() {
		defer r.slow.Done()
		fctx, cancel := context.WithTimeout(r.ctx, XRenameSpan)
		defer cancel()
		if err := r.forget(fctx, v, cred, id, a.vp); err != nil {
			r.log.Debug("forget a rename across partitions; left to recovery", "err", err)
		}
	}()
	return 0, nil, ""
}

// retryCommitted finishes a rename whose source committed in an earlier
// attempt: the image comes again from the source's commit, which answers
// a committed intent with it. It answers success once the target has the
// node (a source that forgot the intent since says so), and has the client
// retry while it could not learn that.
func (r *Router) retryCommitted(ctx context.Context, v *view, cred rpc.Cred, id engine.XID, src, dst uint16) (uint32, []byte, string) {
	var ca pb.XPrepareReply
	st, detail, err := r.xcall(ctx, v, src, pb.Method_XRENAME_COMMIT_SRC, cred,
		&pb.XIntentRequest{Ino: protocol.RootIno(src), Id: id[:]}, &ca)
	if err == nil && st != 0 {
		err = fmt.Errorf("%w: commit at vpart %d: errno %d: %s", errUnsettled, src, st, detail)
	}
	if err == nil && ca.Image != nil {
		if err = r.commitTarget(ctx, v, cred, id, dst, ca.Image); err == nil {
			if ferr := r.forget(ctx, v, cred, id, src); ferr != nil {
				r.log.Debug("forget a rename across partitions; left to recovery", "err", ferr)
			}
		}
	}
	if err != nil {
		r.log.Warn("rename across partitions committed; the target is left to recovery", "err", err)
		return 0, nil, err.Error() // the client retries
	}
	return 0, nil, ""
}

// finishTarget delivers a committed rename's image to the target, then
// lets the source forget the intent.
func (r *Router) finishTarget(ctx context.Context, v *view, cred rpc.Cred, id engine.XID, src, dst uint16, image *pb.XNode) error {
	if err := r.commitTarget(ctx, v, cred, id, dst, image); err != nil {
		return err
	}
	return r.forget(ctx, v, cred, id, src)
}

// commitTarget is step 4: the image arrives at the target.
func (r *Router) commitTarget(ctx context.Context, v *view, cred rpc.Cred, id engine.XID, dst uint16, image *pb.XNode) error {
	st, detail, err := r.xcall(ctx, v, dst, pb.Method_XRENAME_COMMIT_DST, cred,
		&pb.XIntentRequest{Ino: protocol.RootIno(dst), Id: id[:], Image: image}, nil)
	if err == nil && st != 0 {
		err = fmt.Errorf("commit at vpart %d: errno %d: %s", dst, st, detail)
	}
	return err
}

// forget is step 5: the source marks the intent done.
func (r *Router) forget(ctx context.Context, v *view, cred rpc.Cred, id engine.XID, src uint16) error {
	st, detail, err := r.xcall(ctx, v, src, pb.Method_XRENAME_FORGET, cred,
		&pb.XIntentRequest{Ino: protocol.RootIno(src), Id: id[:]}, nil)
	if err == nil && st != 0 {
		err = fmt.Errorf("forget at vpart %d: errno %d: %s", src, st, detail)
	}
	return err
}

// detailBytes encodes an ErrorDetail (nil for none).
func detailBytes(s string) []byte {
	if s == "" {
		return nil
	}
	b, _ := proto.Marshal(&pb.ErrorDetail{Message: s})
	return b
}

// recoverIntents runs the recovery pass every interval until ctx ends.
// It owns nothing but its timer.
func (r *Router) recoverIntents(ctx context.Context, every, grace time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.RecoverOnce(ctx, grace)
	}
}

// RecoverOnce settles the renames across partitions that were left half
// done (by a router or partition that stopped): a source intent
// committed is delivered to its target and forgotten; a source intent
// prepared for longer than grace is aborted, then its target; a target
// intent prepared for longer than grace whose source holds nothing is
// aborted. It returns the number of intents it settled.
func (r *Router) RecoverOnce(ctx context.Context, grace time.Duration) int {
	v := r.view.Load()
	settled := 0
	var root rpc.Cred
	for vp := range v.parts {
		if v.parts[vp] == nil {
			continue
		}
		vp := uint16(vp)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var list pb.XIntentListReply
		st, _, err := r.xcall(cctx, v, vp, pb.Method_XRENAME_LIST, root, &pb.XIntentRequest{Ino: protocol.RootIno(vp)}, &list)
		if err != nil || st != 0 {
			cancel()
			continue
		}
		for _, in := range list.Intents {
			var id engine.XID
			if copy(id[:], in.Id) != engine.XIDLen || in.Peer >= uint32(len(v.parts)) {
				continue
			}
			peer := uint16(in.Peer)
			ok := false
			switch {
			case in.Role == engine.XSource && in.State == engine.XCommitted:
				ok = r.finishTarget(cctx, v, root, id, vp, peer, in.Image) == nil
			case in.Role == engine.XSource && in.State == engine.XPrepared && time.Duration(in.AgeNs) > grace:
				st, _, err := r.xcall(cctx, v, vp, pb.Method_XRENAME_ABORT, root, &pb.XIntentRequest{Ino: protocol.RootIno(vp), Id: id[:]}, nil)
				if err == nil && st == 0 {
					st, _, err = r.xcall(cctx, v, peer, pb.Method_XRENAME_ABORT, root, &pb.XIntentRequest{Ino: protocol.RootIno(peer), Id: id[:]}, nil)
					ok = err == nil && st == 0
				}
			case in.Role == engine.XTarget && time.Duration(in.AgeNs) > grace:
				var state pb.XIntentReply
				st, _, err := r.xcall(cctx, v, peer, pb.Method_XRENAME_STATE, root, &pb.XIntentRequest{Ino: protocol.RootIno(peer), Id: id[:]}, &state)
				// Nothing at the source: it was aborted. Done at the source:
				// the target committed long ago, and this is a late prepare
				// of a retry of the same call. Either way it goes.
				if err == nil && st == 0 && (state.State == engine.XNone || state.State == engine.XDone) {
					st, _, err = r.xcall(cctx, v, vp, pb.Method_XRENAME_ABORT, root, &pb.XIntentRequest{Ino: protocol.RootIno(vp), Id: id[:]}, nil)
					ok = err == nil && st == 0
				}
			}
			if ok {
				settled++
			}
		}
		cancel()
	}
	return settled
}
