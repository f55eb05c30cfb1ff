package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/mount"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// changes reports whether a call with fields f changes what it names: a
// write, or an OPEN for writing or truncating.
func changes(m pb.Method, f *fields) bool {
	if m == pb.Method_CREATE_OPEN {
		return true // a create
	}
	if m == pb.Method_OPEN {
		return f.seven&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0
	}
	return protocol.IsMutation(m)
}

// serve is the router's rpc.Handler. It runs on the reader goroutine of
// the client's connection and never blocks: a call is answered at once,
// handed to a partition connection, or handed to a goroutine of its own.
func (r *Router) serve(c *rpc.Call) {
	var start int64 // the clock is read only for the metrics
	if r.metrics != nil {
		start = monotime()
	}
	m := pb.Method(c.Method)
	info := protocol.Lookup(m)
	cls := rpc.ClassRead
	if info.Class == protocol.ClassMutation {
		cls = rpc.ClassWrite
	}
	if r.inflight[cls].Add(1) > r.limit[cls] {
		r.inflight[cls].Add(-1)
		if r.metrics != nil {
			r.metrics.busy[cls].Inc()
		}
		c.Reply(rpc.StatusBusy, nil)
		return
	}
	rc := reqCall{c: c, cls: cls, start: start}
	if protocol.RouterOnly(m) { // the router's own calls to partitions
		r.reply(&rc, uint32(syscall.EPERM), nil)
		return
	}
	r.route(&rc, r.view.Load(), m)
}

// route serves call rc of method m by the tables of v: it answers it,
// hands it to a partition connection or to a goroutine of its own.
func (r *Router) route(rc *reqCall, v *view, m pb.Method) {
	c := rc.c
	switch protocol.Lookup(m).Route {
	case protocol.RouteLocal:
		if m != pb.Method_NULL { // GROUP_*: a router is no replica
			r.reply(rc, uint32(syscall.ENOSYS), nil)
			return
		}
		if m == pb.Method_SESSION_END { // the router's own call to partitions
			r.reply(rc, uint32(syscall.EPERM), nil)
			return
		}
		r.reply(rc, 0, c.Payload) // NULL: NullReply has NullRequest's field 1
	case protocol.RouteRoot:
		if r.rootPart == nil {
			r.reply(rc, uint32(syscall.ENOSYS), nil)
			return
		}
		r.forward(rc, r.rootPart, c.Payload, 0)
	case protocol.RouteTwo:
		r.serveTwo(rc, v, m)
	case protocol.RouteListing:
		r.serveListing(rc, v, m)
	case protocol.RouteNamespace:
		r.serveOwnerQuota(rc, v, m)
	case protocol.RouteOne:
		if m == pb.Method_LOOKUP && r.serveMountPointLookup(rc, v) {
			return
		}
		r.serveOne(rc, v, m)
	default:
		r.reply(rc, rpc.StatusUnknownMethod, nil)
	}
}

// reqCall is a call being served and what its completion needs.
type reqCall struct {
	c     *rpc.Call
	cls   rpc.Class
	start int64 // monotime of its arrival; 0 without metrics
	moves int   // times a user or group quota's limits were moved for it (ownerquota_move.go)
	// offReader: served again by a goroutine other than its connection's
	// reader, which may not use the reader's batch.
	offReader bool
	hops      int    // times it was sent on to where a node moved (moved.go)
	moved     []byte // the bytes of its last hop; nil before the first
}

// reply answers the call and ends its time in the router.
func (r *Router) reply(rc *reqCall, status uint32, payload []byte) {
	r.replyIn(nil, rc, status, payload)
}

// replyIn answers the call, leaving the reply to batch b (see rpc.Batch),
// and ends its time in the router.
func (r *Router) replyIn(b *rpc.Batch, rc *reqCall, status uint32, payload []byte) {
	rc.c.ReplyIn(b, status, payload)
	r.inflight[rc.cls].Add(-1)
	if m := r.metrics; m != nil {
		m.processing.Observe(seconds(monotime() - rc.start))
	}
}

// replyErr answers the call with an errno from err (EIO if none), and an
// ErrorDetail saying detail if it is not empty.
func (r *Router) replyErr(rc *reqCall, err error, detail string) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		errno = syscall.EIO
	}
	var payload []byte
	if detail != "" {
		payload, _ = proto.Marshal(&pb.ErrorDetail{Message: detail})
	}
	r.reply(rc, uint32(errno), payload)
}

// bufPool holds buffers for rewritten requests.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// route is where a path goes: its entry and the path inside the
// partition.
type route struct {
	norm  string
	entry *mount.Entry
	inner string
}

// lookup normalizes path and finds its entry in v.
func (r *Router) lookup(v *view, path string) (route, error) {
	norm, err := mount.Normalize(path)
	if err != nil {
		return route{}, err
	}
	var t0 int64
	if r.metrics != nil {
		t0 = monotime()
	}
	e, inner, _ := v.mounts.Lookup(norm)
	if r.metrics != nil {
		r.metrics.lookup.Observe(seconds(monotime() - t0))
	}
	return route{norm: norm, entry: e, inner: inner}, nil
}

// mountsBelow reports whether anything is mounted strictly below the
// normalized path p.
func mountsBelow(v *view, p string) bool { return len(v.mounts.Children(p)) > 0 }

// serveOne routes a call that names one node, by path or by inode.
func (r *Router) serveOne(rc *reqCall, v *view, m pb.Method) {
	t0 := r.now()
	f, err := readFields(rc.c.Payload)
	if err != nil {
		r.reply(rc, rpc.StatusMalformed, nil)
		return
	}
	payload := rc.c.Payload
	var vp uint16
	var buf *[]byte
	sc := r.scopeOf(rc.c)
	if f.path != "" {
		var rt route
		if sc != nil {
			rt, err = r.scopedRoute(v, sc.Path, f.path)
		} else {
			rt, err = r.lookup(v, f.path)
		}
		if err != nil {
			r.replyErr(rc, err, "")
			return
		}
		if rt.entry.ReadOnly && changes(m, &f) {
			r.replyErr(rc, syscall.EROFS, fmt.Sprintf("%s is mounted read-only", rt.entry.Prefix))
			return
		}
		if m == pb.Method_RMDIR && mountsBelow(v, rt.norm) {
			r.replyErr(rc, syscall.EBUSY, fmt.Sprintf("%s has mount points below it", rt.norm))
			return
		}
		vp = rt.entry.VPart
		if rt.inner != f.path {
			buf = bufPool.Get().(*[]byte)
			payload = rewrite((*buf)[:0], payload, &f, rt.inner, f.newPath)
		}
	} else {
		if sc != nil && f.ino == protocol.RootIno(0) {
			// The root stands for the top of the scope, which may lie in
			// another partition: the call goes to that one's root.
			if payload, err = scopedRoot(v, m, sc.Path, payload); err != nil {
				r.replyErr(rc, err, "")
				return
			}
			if f, err = readFields(payload); err != nil {
				r.reply(rc, rpc.StatusMalformed, nil)
				return
			}
		}
		vp = protocol.PartitionOf(f.ino)
		if v.readOnly[vp] && changes(m, &f) {
			r.replyErr(rc, syscall.EROFS, fmt.Sprintf("partition %d is mounted read-only", vp))
			return
		}
	}
	r.forwardTo(rc, v, vp, payload, r.now()-t0)
	if buf != nil {
		*buf = payload[:0]
		bufPool.Put(buf)
	}
}

// now returns monotime with metrics, 0 without: the clock is read only for
// them.
func (r *Router) now() int64 {
	if r.metrics == nil {
		return 0
	}
	return monotime()
}

// serveTwo routes RENAME and LINK, which name two entries: both must be
// under the same mount entry (or, by inode, in the same partition).
func (r *Router) serveTwo(rc *reqCall, v *view, m pb.Method) {
	t0 := monotime()
	f, err := readFields(rc.c.Payload)
	if err != nil {
		r.reply(rc, rpc.StatusMalformed, nil)
		return
	}
	op := "rename"
	switch m {
	case pb.Method_LINK:
		op = "link"
	case pb.Method_CLONE:
		op = "clone"
	}
	// A link or clone never crosses partitions.
	linkLike := m == pb.Method_LINK || m == pb.Method_CLONE
	// side resolves one of the two entries.
	type side struct {
		route
		vp   uint16
		ro   bool
		name string // for messages
	}
	sc := r.scopeOf(rc.c)
	resolve := func(path string, ino uint64) (side, error) {
		if path == "" {
			vp := protocol.PartitionOf(ino)
			return side{vp: vp, ro: v.readOnly[vp], name: fmt.Sprintf("inode %d", ino)}, nil
		}
		var rt route
		var err error
		if sc != nil {
			rt, err = r.scopedRoute(v, sc.Path, path)
		} else {
			rt, err = r.lookup(v, path)
		}
		if err != nil {
			return side{}, err
		}
		return side{route: rt, vp: rt.entry.VPart, ro: rt.entry.ReadOnly, name: rt.norm}, nil
	}
	a, err := resolve(f.path, f.ino)
	if err != nil {
		r.replyErr(rc, err, "")
		return
	}
	b, err := resolve(f.newPath, f.newParent)
	if err != nil {
		r.replyErr(rc, err, "")
		return
	}
	switch {
	case linkLike && a.entry != nil && b.entry != nil && a.entry.Prefix != b.entry.Prefix:
		r.replyErr(rc, syscall.EXDEV, fmt.Sprintf("%s %s to %s crosses mount points %s and %s", op, a.norm, b.norm, a.entry.Prefix, b.entry.Prefix))
		return
	case linkLike && a.vp != b.vp:
		r.replyErr(rc, syscall.EXDEV, fmt.Sprintf("%s %s to %s crosses partitions %d and %d", op, a.name, b.name, a.vp, b.vp))
		return
	case a.entry != nil && b.entry != nil && a.vp != b.vp && strings.HasPrefix(b.norm, strings.TrimSuffix(a.norm, "/")+"/"):
		r.replyErr(rc, syscall.EINVAL, fmt.Sprintf("%s %s to %s: into itself", op, a.name, b.name))
		return
	case a.ro || b.ro:
		r.replyErr(rc, syscall.EROFS, fmt.Sprintf("%s %s to %s: mounted read-only", op, a.name, b.name))
		return
	case m == pb.Method_RENAME && (a.entry != nil && mountsBelow(v, a.norm) || b.entry != nil && mountsBelow(v, b.norm)):
		r.replyErr(rc, syscall.EBUSY, fmt.Sprintf("%s %s to %s: mount points below", op, a.name, b.name))
		return
	}
	payload := rc.c.Payload
	newA, newB := f.path, f.newPath
	if a.entry != nil {
		newA = a.inner
	}
	if b.entry != nil {
		newB = b.inner
	}
	if a.vp != b.vp { // a rename across partitions (xrename.go)
		var req pb.RenameRequest
		if err := proto.Unmarshal(rc.c.Payload, &req); err != nil {
			r.reply(rc, rpc.StatusMalformed, nil)
			return
		}
		sa := xside{vp: a.vp, parent: req.Parent, path: newA, name: req.Name}
		sb := xside{vp: b.vp, parent: req.NewParent, path: newB, name: req.NewName}
		cred, id := rc.c.Cred, xid(rc.c.Client, rc.c.ID)
		r.goSpan(rc, func(ctx context.Context) (uint32, []byte, string) {
			return r.xrename(ctx, v, cred, id, sa, sb, req.Flags)
		})
		return
	}
	var buf *[]byte
	if newA != f.path || newB != f.newPath {
		buf = bufPool.Get().(*[]byte)
		payload = rewrite((*buf)[:0], payload, &f, newA, newB)
	}
	r.forwardTo(rc, v, a.vp, payload, monotime()-t0)
	if buf != nil {
		*buf = payload[:0]
		bufPool.Put(buf)
	}
}

// forwardTo forwards the call, with payload, to virtual partition vp of v.
func (r *Router) forwardTo(rc *reqCall, v *view, vp uint16, payload []byte, parseNs int64) {
	if m := r.metrics; m != nil {
		m.parse.Observe(seconds(parseNs))
	}
	pt := v.parts[vp]
	if pt == nil {
		r.replyErr(rc, noRoute(v, vp), noRouteDetail(v, vp))
		return
	}
	r.forward(rc, pt, payload, parseNs)
}

// noRoute is the errno of a call for virtual partition vp, which v does not
// route: ENXIO if a mount entry names it (the tables lack its route, which
// no retry will supply), ESTALE if nothing does (the inode came from a
// partition that is no longer mounted). Never BUSY: that tells clients to
// retry soon.
func noRoute(v *view, vp uint16) syscall.Errno {
	if v.mounted[vp] {
		return syscall.ENXIO
	}
	return syscall.ESTALE
}

// noRouteDetail says which partition lacks a route and what would give it
// one.
func noRouteDetail(v *view, vp uint16) string {
	if v.mounted[vp] {
		return fmt.Sprintf("virtual partition %d is mounted but has no route in tables version %d; set one with `canopy routing set %d ADDR`", vp, v.version, vp)
	}
	return fmt.Sprintf("no partition %d", vp)
}

// pending is a forwarded call waiting for its partition's reply.
type pending struct {
	r    *Router
	rc   reqCall
	pt   *partition
	at   uint32 // the index of pt's server the call went to
	sent int64
	sess *clientSession  // the client's session, whose calls in flight this one counts in (session.go)
	done rpc.ForwardFunc // p.finish, bound once
}

var pendingPool sync.Pool

func init() {
	pendingPool.New = func() any {
		p := new(pending)
		p.done = p.finish
		return p
	}
}

// forward hands the call to a connection of pt. The reply is passed back
// by whichever goroutine receives it.
func (r *Router) forward(rc *reqCall, pt *partition, payload []byte, _ int64) {
	t0 := r.now()
	cl, at := pt.clientAt()
	if cl == nil {
		// Being dialed, or not answering: the client retries. In a group,
		// the next call tries the next replica, and the client keeps
		// retrying (UNAVAILABLE) for as long as its deadline allows, as
		// through a failover.
		if pt.errors != nil {
			pt.errors.Inc()
		}
		if len(pt.servers) > 1 {
			pt.follow(at, "")
			r.reply(rc, rpc.StatusUnavailable, nil)
			return
		}
		r.reply(rc, rpc.StatusBusy, nil)
		return
	}
	if pt.calls != nil {
		pt.calls.Inc()
	}
	pt.sending(at)
	p := pendingPool.Get().(*pending)
	p.r, p.rc, p.pt, p.at, p.sent = r, *rc, pt, at, t0
	c := rc.c
	// The call leaves with the others the client connection's reader has
	// read, in one write, when it has served them all.
	p.sess = r.note(c, pt.vpart)
	batch := c.Batch()
	if rc.offReader {
		batch = nil
	}
	cl.ForwardToken(batch, c.Client, c.ID, tokenOf(c), c.Method, &c.Cred, payload, p.done)
	// p may be finished and reused by now.
	if m := r.metrics; m != nil {
		m.poolWait.Observe(seconds(monotime() - t0))
	}
}

// finish passes the partition's reply back to the client, in batch b of
// the goroutine that received it: with the other replies it receives, in
// one write to each client.
func (p *pending) finish(status uint32, reply []byte, err error, b *rpc.Batch) {
	r, pt := p.r, p.pt
	pt.finished(p.at)
	if m := r.metrics; m != nil {
		m.partitionWait.Observe(seconds(monotime() - p.sent))
	}
	if err != nil || rpc.IsTransport(status) {
		if pt.errors != nil {
			pt.errors.Inc()
		}
	}
	if err != nil {
		// The partition may or may not have executed the call: the client
		// retries it with the same call id, which the partition's retry
		// cache recognizes. In a group, it goes to the next replica
		// (liveness.go).
		status, reply = rpc.StatusBusy, nil
		if !errors.Is(err, rpc.ErrClosed) {
			status = pt.lost(p.at)
			r.log.Debug("forwarding failed", "vpart", pt.vpart, "server", pt.serverAt(p.at).addr, "err", err)
		}
	} else if status == uint32(syscall.EDQUOT) && p.rc.moves < rebalanceRounds && spansPartitions(r.view.Load()) {
		if ref := ownerRefusal(reply); ref != nil {
			// A user's or group's share of the namespace's limit ran out
			// in this partition: move unused limits here, and serve the
			// call again (the failed call changed nothing and is not in
			// the partition's retry cache).
			if p.sess != nil {
				p.sess.inflight.Add(-1)
			}
			rc, vp := p.rc, pt.vpart
			*p = pending{done: p.done}
			pendingPool.Put(p)
			r.moveAndRetry(rc, vp, ref)
			return
		}
	} else if status == uint32(syscall.ESTALE) && followable(&p.rc) {
		if mv := movedOf(reply); mv != nil {
			// A node the call names by inode left that partition: send
			// the call on to where it went.
			if p.sess != nil {
				p.sess.inflight.Add(-1)
			}
			rc := p.rc
			*p = pending{done: p.done}
			pendingPool.Put(p)
			r.followMoved(rc, mv)
			return
		}
	} else if status == rpc.StatusNotLeader {
		// A replica that is not the leader: move the partition to the
		// leader it names, and have the client retry (with the same call
		// id) until the group answers.
		pt.follow(p.at, string(reply))
		status, reply = rpc.StatusUnavailable, nil
	}
	if p.sess != nil {
		p.sess.inflight.Add(-1)
	}
	rc := p.rc
	*p = pending{done: p.done}
	pendingPool.Put(p)
	r.replyIn(b, &rc, status, reply)
}
