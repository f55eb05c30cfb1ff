package webdav_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/gateway/webdav"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// TestUsersMappedToCredentials: WebDAV users given a credential's token
// make their requests under it: a read-only user reads and changes
// nothing, a user scoped to /tenant-a sees only that subtree (as the
// gateway's /tenant-a) and writes there as its uid, and a user with no
// token acts as the gateway.
func TestUsersMappedToCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, d := range []string{"/shared", "/tenant-a"} {
		if _, err := c.Mkdir(ctx, d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Chmod(ctx, "/shared", 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chown(ctx, "/tenant-a", 1500, 1500); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, "/shared/f", []byte("shared"), 0o666); err != nil {
		t.Fatal(err)
	}
	roToken, _, err := c.AddCredential(ctx, client.Credential{Name: "ro", ReadOnly: true, AllowRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	aToken, _, err := c.AddCredential(ctx, client.Credential{Name: "a", Path: "/tenant-a", UIDs: "1000-1999", GIDs: "1000-1999"})
	if err != nil {
		t.Fatal(err)
	}
	specs, tokens := webdav.SplitTokens([]string{"admin:pw", "ro:pw:" + roToken, "alice:pw:" + aToken})
	users, err := webdav.ParseUsers(specs)
	if err != nil {
		t.Fatal(err)
	}
	mapped, closeUsers, err := webdav.DialUsers(ctx, tokens, func(token string) (*client.Client, error) {
		return client.Dial(addr, client.Options{Token: token, Cred: &client.Cred{UID: 1500, GID: 1500}})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer closeUsers()
	srv := httptest.NewServer(webdav.Handler(webdav.Config{Client: c, Users: users, Mapped: mapped}))
	defer srv.Close()
	do := func(user, method, p, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+p, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(user, "pw")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	want := func(status int, user, method, p, body string) {
		t.Helper()
		if got := do(user, method, p, body); got != status {
			t.Errorf("%s %s as %s: status %d, want %d", method, p, user, got, status)
		}
	}
	// The webdav package answers a refused PUT 404 and a refused DELETE
	// 405, whatever the reason: a refusal is any 4xx but 401 here, and
	// what did not change is checked below.
	refused := func(user, method, p, body string) {
		t.Helper()
		if got := do(user, method, p, body); got < 400 || got >= 500 || got == http.StatusUnauthorized {
			t.Errorf("%s %s as %s: status %d, want a refusal", method, p, user, got)
		}
	}
	want(http.StatusCreated, "admin", "PUT", "/shared/byadmin", "x")
	want(http.StatusOK, "ro", "GET", "/shared/f", "")
	refused("ro", "PUT", "/shared/byro", "x")
	refused("ro", "DELETE", "/shared/f", "")
	want(http.StatusCreated, "alice", "PUT", "/tenant-a/mine", "x")
	refused("alice", "GET", "/shared/f", "")
	refused("alice", "PUT", "/shared/stolen", "x")
	refused("alice", "PUT", "/tenant-a/../shared/stolen2", "x")
	if fi, err := c.Stat(ctx, "/tenant-a/mine"); err != nil || fi.Attr().UID != 1500 {
		t.Errorf("alice's file: %+v, %v; want /tenant-a/mine owned by 1500", fi, err)
	}
	if got, err := c.ReadFile(ctx, "/shared/f"); err != nil || string(got) != "shared" {
		t.Errorf("/shared/f after the refusals: %q, %v", got, err)
	}
	if ents, err := c.ReadDir(ctx, "/shared"); err != nil || len(ents) != 2 {
		t.Errorf("/shared: %d entries, %v; want f and byadmin only", len(ents), err)
	}
}
