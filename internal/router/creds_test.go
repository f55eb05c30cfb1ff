package router

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	metaserver "github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// dialAs connects an SDK client presenting token, acting as cred.
func dialAs(t *testing.T, addr, token string, cred client.Cred) *client.Client {
	t.Helper()
	c, err := client.Dial(addr, client.Options{Token: token, Cred: &cred, OpTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("dial %s with a token: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wantErr(t *testing.T, what string, err error, errnos ...syscall.Errno) {
	t.Helper()
	for _, e := range errnos {
		if errors.Is(err, e) {
			return
		}
	}
	t.Errorf("%s: %v, want %v", what, err, errnos)
}

// eventually retries fn until it returns nil, for up to 10 s.
func eventually(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCredentialsInEveryPartition: credentials made at the root are
// enforced in partition 1 through a router, which copies them there: uid
// ranges, root squash, read-only, a path scope that lies in partition 1
// (paths from its top, ".." clamped, an inode from outside refused), and
// revocation.
func TestCredentialsInEveryPartition(t *testing.T) {
	ctx := context.Background()
	var addrs []string
	for p := range uint16(2) {
		_, addr := servertest.Start(t, metaserver.Config{Partition: p})
		addrs = append(addrs, addr)
	}
	root := dial(t, addrs[0])
	direct := dial(t, addrs[1])
	for _, d := range []string{"/tenants/a", "/tenants/b", "/open"} {
		if err := direct.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := direct.Chown(ctx, "/tenants/a", 1500, 1500); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Chmod(ctx, "/open", 0o777); err != nil {
		t.Fatal(err)
	}
	secret, err := direct.Create(ctx, "/tenants/b/secret", 0o666)
	if err != nil {
		t.Fatal(err)
	}
	add := func(c client.Credential) string {
		t.Helper()
		token, _, err := root.AddCredential(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	routerToken := add(client.Credential{Name: "router", Router: true, AllowRoot: true})
	uToken := add(client.Credential{Name: "u", UIDs: "1000-1999", GIDs: "1000-1999"})
	roToken := add(client.Credential{Name: "ro", ReadOnly: true, AllowRoot: true})
	aToken := add(client.Credential{Name: "a", Path: "/p1/tenants/a", UIDs: "1000-1999", GIDs: "1000-1999"})

	src := newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/p1", Vpart: 1, Target: "/"},
	}, map[uint32][]string{0: {addrs[0]}, 1: {addrs[1]}})
	r := startRouter(t, src, Config{Root: []string{addrs[0]}, Token: routerToken})

	u := dialAs(t, r.Addr(), uToken, client.Cred{UID: 1500, GID: 1500})
	eventually(t, "mkdir in partition 1 within the uid range", func() error {
		_, err := u.Mkdir(ctx, "/p1/open/u1500", 0o755)
		return err
	})
	_, err = dialAs(t, r.Addr(), uToken, client.Cred{UID: 2500, GID: 1500}).Mkdir(ctx, "/p1/open/u2500", 0o755)
	wantErr(t, "uid outside the range in partition 1", err, syscall.EPERM)
	fi, err := dialAs(t, r.Addr(), uToken, client.Cred{}).Create(ctx, "/p1/open/squashed", 0o644)
	if err != nil {
		t.Fatalf("create as root under a squashing credential: %v", err)
	}
	if fi.Attr().UID != 65534 {
		t.Errorf("root's file in partition 1 owned by %d, want 65534 (squashed)", fi.Attr().UID)
	}

	ro := dialAs(t, r.Addr(), roToken, client.Cred{})
	_, err = ro.Mkdir(ctx, "/p1/open/ro", 0o755)
	wantErr(t, "mkdir under a read-only credential in partition 1", err, syscall.EACCES)
	if _, err := ro.Stat(ctx, "/p1/tenants/b/secret"); err != nil {
		t.Errorf("stat under a read-only credential: %v", err)
	}

	a := dialAs(t, r.Addr(), aToken, client.Cred{UID: 1500, GID: 1500})
	if _, err := a.Mkdir(ctx, "/x", 0o755); err != nil {
		t.Fatalf("mkdir at the top of a scope in partition 1: %v", err)
	}
	if _, err := direct.Stat(ctx, "/tenants/a/x"); err != nil {
		t.Fatalf("the scoped client's /x is not /tenants/a/x of partition 1: %v", err)
	}
	top, err := a.Stat(ctx, "/")
	if err != nil || !top.IsDir() || top.Attr().UID != 1500 {
		t.Fatalf("the scoped client's root: %+v, %v; want /tenants/a", top, err)
	}
	if ents, err := a.ReadDir(ctx, "/"); err != nil || len(ents) != 1 || ents[0].Name() != "x" {
		t.Errorf("listing of the scope's top: %v, %v; want [x]", ents, err)
	}
	if _, err := a.Stat(ctx, "/../b/secret"); err == nil {
		t.Error("the scoped client reached /tenants/b/secret by ..")
	}
	_, err = a.GetAttr(ctx, secret.Ino())
	wantErr(t, "getattr of an outside inode in partition 1", err, syscall.EACCES)
	_, err = a.SetAttrIno(ctx, secret.Ino(), client.SetAttr{Valid: client.SetMode, Mode: 0o777})
	wantErr(t, "setattr of an outside inode in partition 1", err, syscall.EACCES)
	_, err = a.Stat(ctx, "/p1")
	wantErr(t, "the global path /p1 from inside the scope", err, syscall.ENOENT)

	if err := root.RemoveCredential(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a removed credential refused in partition 1", func() error {
		_, err := u.Stat(ctx, "/p1/open")
		if errors.Is(err, syscall.EACCES) {
			return nil
		}
		return errors.New("still served")
	})
}
