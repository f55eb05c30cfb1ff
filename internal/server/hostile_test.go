package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/router"
	"github.com/canopyfs/canopy/internal/rpc"
)

// tokenClient sends requests as they are, to try what the client library
// would never send.
type tokenClient struct {
	t  *testing.T
	rc *rpc.Client
}

func dialTokenRaw(t *testing.T, addr, token string) *tokenClient {
	t.Helper()
	rc, err := rpc.Dial(addr, rpc.ClientConfig{Token: token, OpTimeout: 5 * time.Second, MaxRetries: -1})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { rc.Close() })
	return &tokenClient{t: t, rc: rc}
}

// call sends req as cred and returns the status, decoding a reply into out.
func (r *tokenClient) call(cred rpc.Cred, m pb.Method, req, out proto.Message) uint32 {
	r.t.Helper()
	data, err := proto.Marshal(req)
	if err != nil {
		r.t.Fatal(err)
	}
	status, reply, err := r.rc.Call(context.Background(), uint16(m), cred, data)
	if err != nil {
		r.t.Fatalf("%s: %v", m, err)
	}
	if status == 0 && out != nil {
		if err := proto.Unmarshal(reply, out); err != nil {
			r.t.Fatal(err)
		}
	}
	return status
}

// hostileScene is a namespace with a tenant's subtree and things outside
// it, and the inodes an outsider learned.
type hostileScene struct {
	addr, token                string // where the tenant connects, with what
	adminAddr                  string // the server itself
	outDir, outFile, otherFile uint64 // /outside, /outside/file, /tenants/b/file
	tenantDir                  uint64 // /tenants/a/dir, made by the tenant
	tenantFile                 uint64 // /tenants/a/dir/f
}

func newHostileScene(t *testing.T, addr string, root *client.Client) *hostileScene {
	t.Helper()
	ctx := context.Background()
	for _, d := range []string{"/tenants/a", "/tenants/b", "/outside"} {
		if err := root.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := root.Chown(ctx, "/tenants/a", 1500, 1500); err != nil {
		t.Fatal(err)
	}
	sc := &hostileScene{addr: addr, adminAddr: addr}
	for _, f := range []struct {
		path string
		ino  *uint64
	}{{"/outside/file", &sc.outFile}, {"/tenants/b/file", &sc.otherFile}} {
		fi, err := root.Create(ctx, f.path, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		*f.ino = uint64(fi.Ino())
	}
	fi, err := root.Stat(ctx, "/outside")
	if err != nil {
		t.Fatal(err)
	}
	sc.outDir = uint64(fi.Ino())
	// Symlinks placed in the tenant's subtree by the administrator,
	// pointing out of it.
	if _, err := root.Symlink(ctx, "/outside/file", "/tenants/a/abs"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Symlink(ctx, "../../outside", "/tenants/a/rel"); err != nil {
		t.Fatal(err)
	}
	token, _, err := root.AddCredential(ctx, client.Credential{Name: "tenant-a", Path: "/tenants/a", UIDs: "1000-1999", GIDs: "1000-1999"})
	if err != nil {
		t.Fatal(err)
	}
	sc.token = token
	return sc
}

// TestHostileScopedClient: a client with a credential scoped to
// /tenants/a (uids 1000-1999, root squashed) tries every way out it can;
// each fails, and nothing outside changes.
func TestHostileScopedClient(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.log")
	s, addr := openAndServe(t, Config{Dir: t.TempDir(), AuditLog: audit})
	sc := newHostileScene(t, addr, dial(t, addr, client.Cred{}))
	denied := runHostile(t, sc)
	s.Close() // writes what the audit log has queued
	checkAudited(t, denied, audit)
}

// checkAudited checks that the audit logs record the tenant's refusals:
// at least denied[m] of each method m.
func checkAudited(t *testing.T, denied map[string]int, logs ...string) {
	t.Helper()
	var lines []string
	for _, name := range logs {
		data, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // a replica that never led audits nothing
		}
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSpace(string(data)); s != "" {
			lines = append(lines, strings.Split(s, "\n")...)
		}
	}
	refused := map[string]int{}
	for _, line := range lines {
		var e auditEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		// Refused by the credential, or by the namespace's permissions
		// (a squashed root): either way audited with its errno.
		if e.Refused && (e.Credential != "tenant-a" || e.Status == 0) {
			t.Errorf("refusal audited as %+v", e)
		}
		if e.Credential == "tenant-a" && e.Status != 0 {
			refused[e.Method]++
		}
	}
	for m, n := range denied {
		if refused[m] < n {
			t.Errorf("%s: %d refusals audited, %d made", m, refused[m], n)
		}
	}
}

// TestHostileScopedClientReplicated is TestHostileScopedClient against a
// partition of three replicas, whose leader confines the calls before it
// proposes or reads them; the followers, which apply the confined
// entries, end byte-identical to it.
func TestHostileScopedClientReplicated(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.log")
	g := newGroupOf(&group{t: t, srvs: make([]*Server, 3), audit: audit})
	lead := g.leader()
	addr := g.peers[lead].Addr
	sc := newHostileScene(t, addr, dial(t, addr, client.Cred{}))
	denied := runHostile(t, sc)
	for i := range g.srvs {
		if i != lead {
			g.waitSame(lead, i)
		}
	}
	var logs []string
	for i, s := range g.srvs {
		s.Close() // writes what the audit log has queued
		g.srvs[i] = nil
		logs = append(logs, fmt.Sprintf("%s.%d", audit, i+1))
	}
	checkAudited(t, denied, logs...)
}

// TestHostileScopedClientReplicatedThroughRouter: the same through a
// router in front of the three replicas.
func TestHostileScopedClientReplicatedThroughRouter(t *testing.T) {
	g := newGroup(t, 3)
	addr := g.peers[g.leader()].Addr
	admin := dial(t, addr, client.Cred{})
	sc := newHostileScene(t, addr, admin)
	routerToken, _, err := admin.AddCredential(context.Background(), client.Credential{Name: "router", Router: true, AllowRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, p := range g.peers {
		all = append(all, p.Addr)
	}
	r, err := router.Start(context.Background(), router.Config{Listen: "127.0.0.1:0", Root: all, Token: routerToken,
		Logger: slog.New(slog.DiscardHandler), TablesWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	sc.addr = r.Addr()
	runHostile(t, sc)
}

// TestHostileScopedClientThroughRouter: the same through a router, which
// holds a router credential and passes the tenant's token on.
func TestHostileScopedClientThroughRouter(t *testing.T) {
	_, addr := openAndServe(t, Config{Dir: t.TempDir()})
	admin := dial(t, addr, client.Cred{})
	sc := newHostileScene(t, addr, admin)
	routerToken, _, err := admin.AddCredential(context.Background(), client.Credential{Name: "router", Router: true, AllowRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.Start(context.Background(), router.Config{Listen: "127.0.0.1:0", Root: []string{addr}, Token: routerToken,
		Logger: slog.New(slog.DiscardHandler), TablesWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	sc.addr = r.Addr()
	runHostile(t, sc)
}

// runHostile makes the attempts and returns how many of each method were
// refused.
func runHostile(t *testing.T, sc *hostileScene) map[string]int {
	refusedBy := map[string]int{}
	ctx := context.Background()
	me := rpc.Cred{UID: 1500, GID: 1500}
	h := dialTokenRaw(t, sc.addr, sc.token)
	root := uint64(1) // the root inode: the tenant's top

	// Inside, the subtree is the whole namespace.
	var a pb.AttrReply
	if st := h.call(me, pb.Method_GETATTR, &pb.NodeRequest{Path: "/"}, &a); st != 0 || a.Attr.Ino != root || a.Attr.Uid != 1500 {
		t.Fatalf("getattr / : status %d, %v", st, a.Attr)
	}
	if st := h.call(me, pb.Method_MKDIR, &pb.CreateRequest{Path: "/dir", Mode: 0o755}, &a); st != 0 {
		t.Fatalf("mkdir /dir: %d", st)
	}
	sc.tenantDir = a.Attr.Ino
	if st := h.call(me, pb.Method_MKNOD, &pb.CreateRequest{Parent: sc.tenantDir, Name: "f", Mode: syscall.S_IFREG | 0o644}, &a); st != 0 {
		t.Fatalf("mknod f: %d", st)
	}
	sc.tenantFile = a.Attr.Ino
	var rd pb.ReaddirReply
	if st := h.call(me, pb.Method_READDIR, &pb.ReaddirRequest{Ino: root}, &rd); st != 0 || len(rd.Entries) != 3 {
		t.Fatalf("readdir of the top: %d, %v", st, rd.Entries)
	}

	denied := []syscall.Errno{syscall.EACCES, syscall.EPERM}
	notThere := []syscall.Errno{syscall.ENOENT, syscall.EACCES, syscall.EPERM}
	for _, tc := range []struct {
		name string
		m    pb.Method
		req  proto.Message
		cred rpc.Cred
		want []syscall.Errno
	}{
		{"..  out of the top", pb.Method_GETATTR, &pb.NodeRequest{Path: "/../../outside/file"}, me, notThere},
		{"lookup .. of the top", pb.Method_LOOKUP, &pb.EntryRequest{Parent: root, Name: ".."}, me, nil}, // the top itself; checked below
		{"absolute path", pb.Method_UNLINK, &pb.EntryRequest{Path: "/outside/file"}, me, notThere},
		{"absolute symlink", pb.Method_GETATTR, &pb.NodeRequest{Path: "/abs"}, me, notThere},
		{"relative symlink", pb.Method_READDIR, &pb.ReaddirRequest{Path: "/rel/"}, me, notThere},
		{"through a symlink", pb.Method_UNLINK, &pb.EntryRequest{Path: "/rel/file"}, me, notThere},
		{"getattr by inode", pb.Method_GETATTR, &pb.NodeRequest{Ino: sc.outFile}, me, denied},
		{"getattr of a guessed inode", pb.Method_GETATTR, &pb.NodeRequest{Ino: sc.otherFile}, me, denied},
		{"setattr by inode", pb.Method_SETATTR, &pb.SetattrRequest{Ino: sc.outFile, Valid: uint32(pb.SetattrMask_SETATTR_MODE), Mode: 0o777}, me, denied},
		{"read by inode", pb.Method_READ_CHUNKS, &pb.ReadChunksRequest{Ino: sc.outFile}, me, denied},
		{"open by inode", pb.Method_OPEN, &pb.OpenRequest{Ino: sc.outFile, Flags: syscall.O_RDWR}, me, denied},
		{"write by inode", pb.Method_COMMIT, &pb.CommitRequest{Ino: sc.outFile, Size: 1 << 20}, me, denied},
		{"readdir by inode", pb.Method_READDIR, &pb.ReaddirRequest{Ino: sc.outDir}, me, denied},
		{"unlink by inode", pb.Method_UNLINK, &pb.EntryRequest{Parent: sc.outDir, Name: "file"}, me, denied},
		{"mkdir by inode", pb.Method_MKDIR, &pb.CreateRequest{Parent: sc.outDir, Name: "x", Mode: 0o777}, me, denied},
		{"rename out", pb.Method_RENAME, &pb.RenameRequest{Parent: sc.tenantDir, Name: "f", NewParent: sc.outDir, NewName: "stolen"}, me, denied},
		{"rename in", pb.Method_RENAME, &pb.RenameRequest{Parent: sc.outDir, Name: "file", NewParent: sc.tenantDir, NewName: "taken"}, me, denied},
		{"link out", pb.Method_LINK, &pb.LinkRequest{Ino: sc.tenantFile, NewParent: sc.outDir, NewName: "l"}, me, denied},
		{"link in", pb.Method_LINK, &pb.LinkRequest{Ino: sc.outFile, NewParent: sc.tenantDir, NewName: "l"}, me, denied},
		{"xattr by inode", pb.Method_SETXATTR, &pb.XattrRequest{Ino: sc.outFile, Name: "user.x", Value: []byte("v")}, me, denied},
		{"lock an outside inode", pb.Method_SETLK, &pb.LockRequest{Ino: sc.outFile, Owner: 1, Type: 1, Flock: true}, me, denied},
		{"test a lock outside", pb.Method_GETLK, &pb.LockRequest{Ino: sc.outFile, Owner: 1, Type: 1, Flock: true}, me, denied},
		{"uid outside the range", pb.Method_GETATTR, &pb.NodeRequest{Path: "/"}, rpc.Cred{UID: 2500, GID: 1500}, denied},
		{"group outside the range", pb.Method_GETATTR, &pb.NodeRequest{Path: "/"}, rpc.Cred{UID: 1500, GID: 1500, Groups: []uint32{0}}, denied},
		{"uid 0, squashed", pb.Method_MKDIR, &pb.CreateRequest{Path: "/dir/byroot", Mode: 0o755}, rpc.Cred{}, denied},
		{"uid 0 chown", pb.Method_SETATTR, &pb.SetattrRequest{Path: "/dir", Valid: uint32(pb.SetattrMask_SETATTR_UID), Uid: 0}, rpc.Cred{}, denied},
		{"credential calls", pb.Method_AUTH_LIST, &pb.AuthNameRequest{}, me, denied},
		{"table changes", pb.Method_TABLES_UPDATE, &pb.TablesUpdate{RemoveMounts: []string{"/"}}, me, denied},
	} {
		var out pb.AttrReply
		st := h.call(tc.cred, tc.m, tc.req, nil)
		if tc.want == nil {
			if st = h.call(tc.cred, tc.m, tc.req, &out); st != 0 || out.Attr.Ino != root {
				t.Errorf("%s: status %d, %v; want the top", tc.name, st, out.Attr)
			}
			continue
		}
		ok := false
		for _, e := range tc.want {
			ok = ok || st == uint32(e)
		}
		if !ok {
			t.Errorf("%s: status %d (%v), want one of %v", tc.name, st, syscall.Errno(st), tc.want)
		}
		if st == uint32(syscall.EACCES) || st == uint32(syscall.EPERM) {
			refusedBy[tc.m.String()]++
		}
	}

	// Nothing outside changed.
	admin := dial(t, sc.adminAddr, client.Cred{})
	fi, err := admin.Stat(ctx, "/outside/file")
	if err != nil || fi.Attr().Mode&0o777 == 0o777 || fi.Size() != 0 {
		t.Errorf("outside file after the attempts: %+v, %v", fi, err)
	}
	if names, err := admin.ReadDir(ctx, "/outside"); err != nil || len(names) != 1 {
		t.Errorf("outside directory after the attempts: %v, %v", names, err)
	}
	if _, err := admin.Stat(ctx, "/tenants/a/dir/f"); err != nil {
		t.Errorf("the tenant's file moved: %v", err)
	}
	if _, err := admin.Stat(ctx, "/tenants/a/dir/byroot"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("squashed root made a directory: %v", err)
	}

	// Tokens: forged, revoked.
	// The real token with its last two digits changed (to "00", or "11"
	// where they were "00": one token in 256 ends so).
	forgedSuffix := "00"
	if strings.HasSuffix(sc.token, forgedSuffix) {
		forgedSuffix = "11"
	}
	for _, bad := range []string{sc.token[:len(sc.token)-2] + forgedSuffix, "cnpy.nobody.0000000000000000000000000000000000000000000000000000000000000000"} {
		// Refused in the handshake by a server; by a router, which
		// keeps no credentials, at the first call.
		rc, err := rpc.Dial(sc.addr, rpc.ClientConfig{Token: bad, MaxRetries: -1})
		if err == nil {
			forged := &tokenClient{t: t, rc: rc}
			if st := forged.call(me, pb.Method_GETATTR, &pb.NodeRequest{Path: "/"}, nil); st != uint32(syscall.EACCES) {
				t.Errorf("call with forged token %q: status %d, want EACCES", bad, st)
			}
			rc.Close()
		} else if !errors.Is(err, rpc.ErrUnauthenticated) {
			t.Errorf("forged token %q: %v", bad, err)
		}
	}
	if err := admin.RemoveCredential(ctx, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	if st := h.call(me, pb.Method_GETATTR, &pb.NodeRequest{Path: "/"}, nil); st != uint32(syscall.EACCES) {
		t.Errorf("call on a revoked credential: status %d", st)
	}
	return refusedBy
}
