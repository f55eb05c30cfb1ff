package router

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"path"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Credentials in every partition (see docs/security.md). The root
// partition keeps the credentials; the router copies them to every other
// partition it routes to, so that the client tokens it passes on are
// checked there as at the root. Its credentials goroutine reads the
// root's table (AUTH_TABLE) every credSyncEvery and gives each other
// partition its copy (AUTH_SYNC) when the copy changed, and every
// credResyncEvery anyway (a partition answers a push equal to its copy
// without logging it). A credential's path scope is a path of the global
// namespace; each partition's copy has it translated into a path of that
// partition (scopeIn), and credentials whose scope sees nothing of a
// partition are left out of its copy, so their tokens are refused there.
//
// A path-scoped client sees its subtree as its whole namespace, so the
// router routes its paths from the top of its scope: the path is placed
// below the scope (".." cannot climb above it), routed by the mount
// table, and sent relative to the scope's top in the partition it goes to
// (scopedRoute); the partition resolves it from there, confined as
// always. The router knows a client's scope from its own copy of the
// table.

const (
	// credSyncEvery is how often the router reads the root partition's
	// credentials: a change reaches every partition within about that.
	credSyncEvery = time.Second
	// credResyncEvery is how often it pushes a partition's copy though
	// nothing changed (a partition restored from an old backup, say).
	credResyncEvery = 30 * time.Second
)

// syncCreds is the router's credentials goroutine: it runs until ctx ends.
func (r *Router) syncCreds(ctx context.Context) {
	defer r.wg.Done()
	pushed := map[uint16]pushState{}
	failing := false
	for {
		if err := r.syncOnce(ctx, pushed); err != nil && !failing {
			r.log.Warn("copying the credentials to the partitions failed; retrying", "err", err)
			failing = true
		} else if err == nil {
			failing = false
		}
		if !sleepCtx(ctx, credSyncEvery) {
			return
		}
	}
}

// pushState is what the router last gave a partition.
type pushState struct {
	sum [sha256.Size]byte
	at  time.Time
}

// syncOnce reads the root's credentials and pushes the copies that
// changed.
func (r *Router) syncOnce(ctx context.Context, pushed map[uint16]pushState) error {
	if r.rootPart == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := proto.Marshal(&pb.AuthNameRequest{Ino: protocol.RootIno(0)})
	status, out, err := r.callGroup(cctx, r.rootPart, pb.Method_AUTH_TABLE, rpc.Cred{}, req)
	if err != nil {
		return fmt.Errorf("read the credentials: %w", err)
	}
	if status != 0 {
		return fmt.Errorf("read the credentials: %w", errnoOf(status))
	}
	var tab pb.AuthTableReply
	if err := proto.Unmarshal(out, &tab); err != nil {
		return fmt.Errorf("read the credentials: %w", err)
	}
	creds := make([]*auth.Credential, 0, len(tab.Credentials))
	for _, w := range tab.Credentials {
		c, err := auth.FromWire(w)
		if err != nil {
			return fmt.Errorf("credential %q: %w", w.Name, err)
		}
		creds = append(creds, c)
	}
	if cur := r.creds.Load(); cur == nil || !sameTable(cur, creds) {
		r.creds.Store(auth.NewTable(creds...))
	}
	v := r.view.Load()
	var errs []error
	for vp := 1; vp < len(v.parts); vp++ {
		if v.parts[vp] == nil {
			continue
		}
		copyReq := &pb.AuthSyncRequest{Ino: protocol.RootIno(uint16(vp)), Credentials: translate(v, uint16(vp), creds)}
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(copyReq)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		if p, ok := pushed[uint16(vp)]; ok && p.sum == sum && time.Since(p.at) < credResyncEvery {
			continue
		}
		if err := r.callPart(ctx, uint16(vp), &origin{client: r.self}, pb.Method_AUTH_SYNC, data); err != nil {
			errs = append(errs, fmt.Errorf("vpart %d: %w", vp, err))
			continue
		}
		pushed[uint16(vp)] = pushState{sum: sum, at: time.Now()}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// sameTable reports whether tab holds exactly creds.
func sameTable(tab *auth.Table, creds []*auth.Credential) bool {
	if tab.Len() != len(creds) {
		return false
	}
	for _, c := range creds {
		old := tab.Get(c.Name)
		if old == nil || !proto.Equal(old.ToWire(true), c.ToWire(true)) {
			return false
		}
	}
	return true
}

// translate returns the copy of creds for partition vp of v.
func translate(v *view, vp uint16, creds []*auth.Credential) []*pb.Credential {
	out := make([]*pb.Credential, 0, len(creds))
	for _, c := range creds {
		w := c.ToWire(true)
		if c.Scoped() {
			top, ok := scopeIn(v, vp, c.Path)
			if !ok {
				continue
			}
			w.Path = top
		}
		out = append(out, w)
	}
	return out
}

// scopeIn returns the path of partition vp that is the top of a scope p
// (a path of the global namespace): the place of p itself if p lies in
// vp, or the target of the one entry of vp mounted below p. It reports
// false if the scope sees nothing of vp, or more than one of its
// entries below p (no single top: left out, so refused).
func scopeIn(v *view, vp uint16, p string) (string, bool) {
	if e, inner, ok := v.mounts.Lookup(p); ok && e.VPart == vp {
		return inner, true
	}
	top, n := "", 0
	for _, e := range v.mounts.Table().Entries {
		if e.VPart == vp && under(e.Prefix, p) && e.Prefix != p {
			top, n = e.Target, n+1
		}
	}
	return top, n == 1
}

// under reports whether the normalized path p is dir or lies below it.
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir) && p[len(dir)] == '/'
}

// scopeOf returns the path-scoped credential of the client of call c, on
// the reader goroutine of c's connection, or nil if it has none (no
// token, a token the router's copy does not know, an unscoped one).
func (r *Router) scopeOf(c *rpc.Call) *auth.Credential {
	cc, _ := c.Identity.(*clientConn)
	if cc == nil || cc.token == nil {
		return nil
	}
	tab := r.creds.Load()
	if tab == nil {
		return nil
	}
	if cc.tab != tab {
		cc.tab = tab
		if fp, ok := auth.ParseCertToken(cc.token); ok {
			cc.cred, _ = tab.AuthenticateFingerprint(fp, "", netip.Addr{}, time.Now().UnixNano())
		} else {
			cc.cred, _ = tab.Authenticate(cc.token, netip.Addr{}, time.Now().UnixNano())
		}
	}
	if cc.cred == nil || !cc.cred.Scoped() {
		return nil
	}
	return cc.cred
}

// scopedRoute routes path p of a client scoped to top: p is placed below
// top (a ".." cannot climb above it), routed, and returned relative to
// the top of the scope in the partition it goes to. EACCES if the scope
// sees no single top there.
func (r *Router) scopedRoute(v *view, top, p string) (route, error) {
	global := path.Join(top, path.Clean("/"+p))
	rt, err := r.lookup(v, global)
	if err != nil {
		return rt, err
	}
	in, ok := scopeIn(v, rt.entry.VPart, top)
	if !ok || !under(rt.inner, in) {
		return rt, fmt.Errorf("%s is outside the scope: %w", p, syscall.EACCES)
	}
	rt.inner = "/" + strings.TrimPrefix(strings.TrimPrefix(rt.inner, in), "/")
	return rt, nil
}

// errnoOf converts a reply status to an error.
func errnoOf(status uint32) error {
	if rpc.IsTransport(status) {
		return &rpc.StatusError{Status: status}
	}
	return syscall.Errno(status)
}

// scopedRoot returns the request of a call of a client scoped to top
// that names the root inode, made to name the root of the partition
// holding the top of the scope instead (unchanged if that is the root
// partition).
func scopedRoot(v *view, m pb.Method, top string, payload []byte) ([]byte, error) {
	e, ok := v.mounts.Owner(top)
	if !ok || e.VPart == 0 {
		return payload, nil
	}
	req := protocol.NewRequest(m)
	if req == nil {
		return nil, fmt.Errorf("method %d: %w", m, syscall.ENOSYS)
	}
	if err := proto.Unmarshal(payload, req); err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	fd := req.ProtoReflect().Descriptor().Fields().ByNumber(protocol.FieldIno)
	if fd == nil {
		return payload, nil
	}
	req.ProtoReflect().Set(fd, protoreflect.ValueOfUint64(protocol.RootIno(e.VPart)))
	return proto.Marshal(req)
}
