package server

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/rpc"
)

// dialToken connects to addr with token, acting as cred.
func dialToken(t testing.TB, addr, token string, cred client.Cred) (*client.Client, error) {
	t.Helper()
	c, err := client.Dial(addr, client.Options{Token: token, Cred: &cred, OpTimeout: 5 * time.Second})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func mustDialToken(t testing.TB, addr, token string, cred client.Cred) *client.Client {
	t.Helper()
	c, err := dialToken(t, addr, token, cred)
	if err != nil {
		t.Fatalf("dial with token: %v", err)
	}
	return c
}

func wantErrno(t *testing.T, what string, err error, errnos ...syscall.Errno) {
	t.Helper()
	for _, e := range errnos {
		if errors.Is(err, e) {
			return
		}
	}
	t.Errorf("%s: %v, want %v", what, err, errnos)
}

func TestCredentialsEnforcedAndRevoked(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Dir: t.TempDir()}
	_, addr := openAndServe(t, cfg)
	root := dial(t, addr, client.Cred{})
	if err := root.MkdirAll(ctx, "/tenants/a", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Chown(ctx, "/tenants/a", 1500, 1500); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Mkdir(ctx, "/tenants/a/open", 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Chmod(ctx, "/tenants/a/open", 0o777); err != nil {
		t.Fatal(err)
	}
	token, cr, err := root.AddCredential(ctx, client.Credential{Name: "a", UIDs: "1000-1999", GIDs: "1000-1999"})
	if err != nil {
		t.Fatal(err)
	}
	if cr.SquashUID != 65534 || cr.Generation != 1 || cr.UIDs != "1000-1999" {
		t.Fatalf("credential %+v", cr)
	}
	roToken, _, err := root.AddCredential(ctx, client.Credential{Name: "ro", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := root.AddCredential(ctx, client.Credential{Name: "a"}); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("second add of a: %v, want EEXIST", err)
	}

	a := mustDialToken(t, addr, token, client.Cred{UID: 1500, GID: 1500})
	if _, err := a.Mkdir(ctx, "/tenants/a/x", 0o755); err != nil {
		t.Fatalf("mkdir within the credential: %v", err)
	}
	outside := mustDialToken(t, addr, token, client.Cred{UID: 2500, GID: 1500})
	_, err = outside.Stat(ctx, "/tenants/a")
	wantErrno(t, "uid outside the range", err, syscall.EPERM)
	group := mustDialToken(t, addr, token, client.Cred{UID: 1500, GID: 1500, Groups: []uint32{0}})
	_, err = group.Stat(ctx, "/tenants/a")
	wantErrno(t, "group outside the range", err, syscall.EPERM)

	asRoot := mustDialToken(t, addr, token, client.Cred{UID: 0, GID: 0})
	_, err = asRoot.Mkdir(ctx, "/tenants/a/rootdir", 0o755)
	wantErrno(t, "squashed root in a directory it may not write", err, syscall.EACCES)
	fi, err := asRoot.Mkdir(ctx, "/tenants/a/open/squashed", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Attr().UID != 65534 || fi.Attr().GID != 65534 {
		t.Fatalf("squashed root made a directory owned by %d:%d", fi.Attr().UID, fi.Attr().GID)
	}
	_, err = asRoot.Credentials(ctx)
	wantErrno(t, "auth ls without admin", err, syscall.EPERM)

	ro := mustDialToken(t, addr, roToken, client.Cred{UID: 0, GID: 0})
	if _, err := ro.Stat(ctx, "/tenants/a/x"); err != nil {
		t.Fatalf("read under a read-only credential: %v", err)
	}
	_, err = ro.Mkdir(ctx, "/tenants/ro", 0o755)
	wantErrno(t, "mkdir under a read-only credential", err, syscall.EACCES)
	_, err = ro.Create(ctx, "/tenants/ro-file", 0o644)
	wantErrno(t, "create under a read-only credential", err, syscall.EACCES)

	// The last forgery changes one hex digit of a real token: it must
	// differ from the token whatever digit the token ends in.
	last := "0"
	if strings.HasSuffix(roToken, "0") {
		last = "1"
	}
	for _, bad := range []string{"cnpy.a.0000000000000000000000000000000000000000000000000000000000000000", "garbage", roToken[:len(roToken)-1] + last} {
		if _, err := dialToken(t, addr, bad, client.Cred{}); !errors.Is(err, rpc.ErrUnauthenticated) {
			t.Errorf("dial with forged token %q: %v, want ErrUnauthenticated", bad, err)
		}
	}

	// Rotation: the old token stops working on the open connection and
	// for new ones; the new one works.
	newToken, err := root.RotateCredential(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Stat(ctx, "/tenants/a/x")
	wantErrno(t, "call on a connection of a rotated token", err, syscall.EACCES)
	if _, err := dialToken(t, addr, token, client.Cred{UID: 1500, GID: 1500}); !errors.Is(err, rpc.ErrUnauthenticated) {
		t.Errorf("dial with the rotated token: %v", err)
	}
	a2 := mustDialToken(t, addr, newToken, client.Cred{UID: 1500, GID: 1500})
	if _, err := a2.Stat(ctx, "/tenants/a/x"); err != nil {
		t.Fatal(err)
	}
	// Revocation, under the open connection.
	if err := root.RemoveCredential(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	_, err = a2.Stat(ctx, "/tenants/a/x")
	wantErrno(t, "call on a connection of a revoked credential", err, syscall.EACCES)
	if _, err := root.Credential(ctx, "a"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("show a removed credential: %v", err)
	}
}

func TestCredentialExpires(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UnixNano()
	clock := func() int64 { return now }
	_, addr := openAndServe(t, Config{Dir: t.TempDir(), Clock: func() int64 { return clock() }})
	root := dial(t, addr, client.Cred{})
	token, cr, err := root.AddCredential(ctx, client.Credential{Name: "brief", ExpiresIn: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if cr.Expires.UnixNano() != now+int64(time.Hour) {
		t.Fatalf("expires %v, want an hour after %v", cr.Expires, time.Unix(0, now))
	}
	c := mustDialToken(t, addr, token, client.Cred{})
	if _, err := c.Stat(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	later := now + int64(2*time.Hour)
	clock = func() int64 { return later }
	_, err = c.Stat(ctx, "/")
	wantErrno(t, "call after expiry", err, syscall.EACCES)
	if _, err := dialToken(t, addr, token, client.Cred{}); !errors.Is(err, rpc.ErrUnauthenticated) {
		t.Errorf("dial after expiry: %v", err)
	}
}

func TestCredentialsSurviveRestartAndRequireToken(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, every := range []int{1_000_000, 1} { // from the log, and from a checkpoint
		cfg := Config{Dir: filepath.Join(dir, map[int]string{1_000_000: "log", 1: "ckpt"}[every]), CheckpointEvery: every}
		s, addr := openAndServe(t, cfg)
		root := dial(t, addr, client.Cred{})
		token, _, err := root.AddCredential(ctx, client.Credential{Name: "admin", Admin: true, AllowRoot: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := root.AddCredential(ctx, client.Credential{Name: "b", Path: "/b", UIDs: "7"}); err != nil {
			t.Fatal(err)
		}
		root.Close()
		s.Close()

		cfg.RequireToken = true
		_, addr = openAndServe(t, cfg)
		if _, err := dialToken(t, addr, "", client.Cred{}); !errors.Is(err, rpc.ErrUnauthenticated) {
			t.Fatalf("dial without a token where one is required: %v", err)
		}
		admin := mustDialToken(t, addr, token, client.Cred{})
		list, err := admin.Credentials(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Name != "admin" || list[1].Name != "b" || list[1].Path != "/b" || list[1].UIDs != "7" {
			t.Fatalf("after restart: %+v", list)
		}
	}
}
