package router

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/mount"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// spanTimeout bounds the partition calls of one call that spans
// partitions.
const spanTimeout = 30 * time.Second

// serveListing serves READDIR, SUMMARY and STATFS. A directory with
// nothing mounted below it is forwarded like any call; otherwise, and for
// STATFS always, a goroutine of its own asks every partition concerned
// and puts the answers together.
func (r *Router) serveListing(rc *reqCall, v *view, m pb.Method) {
	if m == pb.Method_STATFS {
		if r.statfsNamesNode(v, rc.c.Payload) {
			r.serveOne(rc, v, m)
			return
		}
		r.goSpan(rc, func(ctx context.Context) (uint32, []byte, string) { return r.statfs(ctx, v) })
		return
	}
	if r.scopeOf(rc.c) != nil { // a scoped client's listings show no mount points (creds.go)
		r.serveOne(rc, v, m)
		return
	}
	t0 := monotime()
	f, err := readFields(rc.c.Payload)
	if err != nil {
		r.reply(rc, rpc.StatusMalformed, nil)
		return
	}
	// The directory, in the global namespace, if the call names one we
	// can place.
	dir := ""
	if f.path != "" {
		if d, err := mount.Normalize(f.path); err == nil {
			dir = d
		}
	} else if p, ok := v.rootPrefix[protocol.PartitionOf(f.ino)]; ok && protocol.IsRoot(f.ino) {
		dir = p
	}
	if dir == "" || !mountsBelow(v, dir) {
		r.serveOne(rc, v, m)
		return
	}
	// Route the call itself as serveOne would, then merge.
	payload := rc.c.Payload
	vp := protocol.PartitionOf(f.ino)
	if f.path != "" {
		rt, err := r.lookup(v, f.path)
		if err != nil {
			r.replyErr(rc, err, "")
			return
		}
		vp = rt.entry.VPart
		if rt.inner != f.path {
			payload = rewrite(nil, payload, &f, rt.inner, f.newPath)
		}
	}
	if mt := r.metrics; mt != nil {
		mt.parse.Observe(seconds(monotime() - t0))
	}
	cursor, limit, attrs := f.sevenStr, f.eight, f.nine != 0
	cred := rc.c.Cred
	r.goSpan(rc, func(ctx context.Context) (uint32, []byte, string) {
		status, out, err := r.call(ctx, v, vp, m, cred, payload)
		if err != nil || status != 0 {
			return status, out, errString(err)
		}
		if m == pb.Method_SUMMARY {
			return r.summary(ctx, v, dir, cred, out)
		}
		return r.mergeReaddir(ctx, v, dir, cred, out, cursor, limit, attrs)
	})
}

// serveMountPointLookup answers a LOOKUP by parent inode and name that
// names a mount point: the parent is the root of a partition the router
// knows the place of (as a FUSE mount looks up /p1 in the root), and that
// place joined with the name is a mount entry's prefix. The partition of
// the parent knows nothing of the entry, so the router resolves the
// mounted directory in its own partition and answers with it. It reports
// whether it took the call.
func (r *Router) serveMountPointLookup(rc *reqCall, v *view) bool {
	if v.mounts.Len() < 2 || r.scopeOf(rc.c) != nil {
		return false // only the root is mounted, or a scoped client: no mount points
	}
	f, err := readFields(rc.c.Payload)
	if err != nil || f.path != "" || !protocol.IsRoot(f.ino) || f.name == "" || strings.ContainsRune(f.name, '/') {
		return false
	}
	dir, ok := v.rootPrefix[protocol.PartitionOf(f.ino)]
	if !ok {
		return false
	}
	p := path.Join(dir, f.name)
	if e, _, _ := v.mounts.Lookup(p); e == nil || e.Prefix != p {
		return false
	}
	cred := rc.c.Cred
	r.goSpan(rc, func(ctx context.Context) (uint32, []byte, string) {
		status, out, err := r.callPath(ctx, v, pb.Method_RESOLVE, cred, p)
		return status, out, errString(err)
	})
	return true
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// goSpan serves the call on a goroutine of its own with fn, which returns
// the reply; a non-empty detail with status 0 means a failure to reach a
// partition, answered StatusBusy so that the client retries.
func (r *Router) goSpan(rc *reqCall, fn func(ctx context.Context) (status uint32, reply []byte, detail string)) {
	r.slow.Add(1)
	done := *rc
	o := r.originOf(rc.c)
	go func() {
		defer r.slow.Done()
		ctx, cancel := context.WithTimeout(r.ctx, spanTimeout)
		defer cancel()
		ctx = withOrigin(ctx, o)
		status, reply, detail := fn(ctx)
		if status == 0 && detail != "" {
			r.log.Debug("call across partitions failed", "method", done.c.Method, "err", detail)
			status, reply = rpc.StatusBusy, nil
		}
		r.reply(&done, status, reply)
	}()
}

// call makes one call to virtual partition vp of v and waits for the
// reply. A transport failure is an error. A replica that is not its
// group's leader moves the partition to the leader it names (follow), and
// the call goes there, with short pauses while the group elects one, for
// as long as ctx allows.
func (r *Router) call(ctx context.Context, v *view, vp uint16, m pb.Method, cred rpc.Cred, req []byte) (uint32, []byte, error) {
	pt := v.parts[vp]
	if pt == nil {
		return 0, nil, fmt.Errorf("%s: %w", noRouteDetail(v, vp), noRoute(v, vp))
	}
	return r.callGroup(ctx, pt, m, cred, req)
}

// callGroup is call, to partition pt.
func (r *Router) callGroup(ctx context.Context, pt *partition, m pb.Method, cred rpc.Cred, req []byte) (uint32, []byte, error) {
	vp := pt.vpart
	pause := 2 * time.Millisecond
	for {
		cl, at := pt.clientAt()
		if cl == nil {
			return 0, nil, fmt.Errorf("vpart %d: not connected yet", vp)
		}
		status, out, err := r.callOn(ctx, pt, cl, at, m, cred, req)
		if err != nil || status != rpc.StatusNotLeader || len(pt.servers) == 1 {
			return status, out, err
		}
		pt.follow(at, string(out))
		if !sleepCtx(ctx, pause) {
			return 0, nil, fmt.Errorf("vpart %d: no leader: %w", vp, ctx.Err())
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// callOn makes the call on cl, a connection to the server at index at of
// pt.
func (r *Router) callOn(ctx context.Context, pt *partition, cl *rpc.Client, at uint32, m pb.Method, cred rpc.Cred, req []byte) (uint32, []byte, error) {
	vp := pt.vpart
	if pt.calls != nil {
		pt.calls.Inc()
	}
	var (
		status uint32
		out    []byte
		err    error
	)
	if o := originIn(ctx); o != nil {
		if o.sess != nil {
			o.sess.add(vp)
			o.sess.inflight.Add(1)
		}
		status, out, err = forwardWait(ctx, cl, o, m, cred, req, markIn(ctx))
		if o.sess != nil {
			o.sess.inflight.Add(-1)
		}
	} else {
		status, out, err = cl.CallMarked(ctx, uint16(m), cred, req, markIn(ctx))
	}
	if err != nil {
		if pt.errors != nil {
			pt.errors.Inc()
		}
		pt.failed(at)
		return 0, nil, fmt.Errorf("vpart %d: %w", vp, err)
	}
	return status, out, nil
}

// callPath makes a call naming path in the global namespace, routed by v.
func (r *Router) callPath(ctx context.Context, v *view, m pb.Method, cred rpc.Cred, p string) (uint32, []byte, error) {
	e, inner, _ := v.mounts.Lookup(p)
	req, err := proto.Marshal(&pb.NodeRequest{Path: inner})
	if err != nil {
		return 0, nil, err
	}
	return r.call(ctx, v, e.VPart, m, cred, req)
}

// statfs adds up the figures of every partition that a mount entry names.
func (r *Router) statfs(ctx context.Context, v *view) (uint32, []byte, string) {
	var sum pb.StatfsReply
	for vp := range v.mounted {
		if !v.mounted[vp] {
			continue
		}
		req, _ := proto.Marshal(&pb.NodeRequest{Ino: protocol.RootIno(uint16(vp))})
		status, out, err := r.call(ctx, v, uint16(vp), pb.Method_STATFS, rpc.Cred{}, req)
		if err != nil || status != 0 {
			return status, nil, errString(err)
		}
		var one pb.StatfsReply
		if err := proto.Unmarshal(out, &one); err != nil {
			return 0, nil, fmt.Sprintf("vpart %d: decode statfs: %v", vp, err)
		}
		sum.TotalBytes += one.TotalBytes
		sum.UsedBytes += one.UsedBytes
		sum.TotalInodes += one.TotalInodes
		sum.UsedInodes += one.UsedInodes
		sum.TrashFiles += one.TrashFiles
		sum.TrashBytes += one.TrashBytes
		if sum.BlockSize == 0 {
			sum.BlockSize, sum.MaxName = one.BlockSize, one.MaxName
		}
	}
	out, _ := proto.Marshal(&sum)
	return 0, out, ""
}

// entriesBelow returns the mount entries strictly below dir.
func entriesBelow(v *view, dir string) []mount.Entry {
	var out []mount.Entry
	prefix := dir + "/"
	if dir == "/" {
		prefix = "/"
	}
	v.mounts.Entries(func(e *mount.Entry) bool {
		if e.Prefix != dir && strings.HasPrefix(e.Prefix, prefix) {
			out = append(out, *e)
		}
		return true
	})
	return out
}

// summary adds to own, the summary of dir in its own partition, those of
// the mounts below dir.
func (r *Router) summary(ctx context.Context, v *view, dir string, cred rpc.Cred, own []byte) (uint32, []byte, string) {
	var sum pb.SummaryReply
	if err := proto.Unmarshal(own, &sum); err != nil {
		return 0, nil, fmt.Sprintf("decode summary: %v", err)
	}
	for _, e := range entriesBelow(v, dir) {
		status, out, err := r.callPath(ctx, v, pb.Method_SUMMARY, cred, e.Prefix)
		if err != nil {
			return 0, nil, err.Error()
		}
		if status == uint32(syscall.ENOENT) {
			continue // a mount whose target is missing holds nothing
		}
		if status != 0 {
			return status, nil, ""
		}
		var one pb.SummaryReply
		if err := proto.Unmarshal(out, &one); err != nil {
			return 0, nil, fmt.Sprintf("decode summary of %s: %v", e.Prefix, err)
		}
		sum.Dirs += one.Dirs
		sum.Files += one.Files
		sum.Bytes += one.Bytes
	}
	out, _ := proto.Marshal(&sum)
	return 0, out, ""
}

// mergeReaddir merges the mount points directly below dir into a page of
// its listing, page, which the call with cursor and limit returned: the
// mount points whose names fall in the page's range, in name order, each
// as a directory (replacing an entry of the same name). A page that grows
// past limit is cut and continues after its last name, so that every name
// comes exactly once over the pages.
func (r *Router) mergeReaddir(ctx context.Context, v *view, dir string, cred rpc.Cred, page []byte, cursor string, limit uint64, attrs bool) (uint32, []byte, string) {
	var rep pb.ReaddirReply
	if err := proto.Unmarshal(page, &rep); err != nil {
		return 0, nil, fmt.Sprintf("decode listing: %v", err)
	}
	last := "" // the page covers names in (cursor, last]; "" = to the end
	if !rep.Eof {
		last = rep.NextCursor
		if last == "" && len(rep.Entries) > 0 {
			last = rep.Entries[len(rep.Entries)-1].Name
		}
	}
	byName := make(map[string]int, len(rep.Entries))
	for i, d := range rep.Entries {
		byName[d.Name] = i
	}
	for _, name := range v.mounts.Children(dir) {
		if name <= cursor || last != "" && name > last {
			continue
		}
		d := &pb.Dirent{Name: name, Type: syscall.S_IFDIR}
		status, out, err := r.callPath(ctx, v, pb.Method_RESOLVE, cred, path.Join(dir, name))
		if err != nil {
			return 0, nil, err.Error()
		}
		var a pb.AttrReply
		if status == 0 && proto.Unmarshal(out, &a) == nil && a.Attr != nil {
			d.Ino, d.Type = a.Attr.Ino, a.Attr.Mode&syscall.S_IFMT
			if attrs {
				d.Attr = a.Attr
			}
		}
		if i, ok := byName[name]; ok {
			rep.Entries[i] = d
		} else {
			rep.Entries = append(rep.Entries, d)
		}
	}
	sort.Slice(rep.Entries, func(i, j int) bool { return rep.Entries[i].Name < rep.Entries[j].Name })
	if limit > 0 && uint64(len(rep.Entries)) > limit {
		rep.Entries = rep.Entries[:limit]
		rep.NextCursor = rep.Entries[limit-1].Name
		rep.Eof = false
	}
	out, err := proto.Marshal(&rep)
	if err != nil {
		return 0, nil, fmt.Sprintf("encode listing: %v", err)
	}
	return 0, out, ""
}
