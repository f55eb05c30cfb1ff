package webdav_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/gateway/webdav"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
	"github.com/canopyfs/canopy/internal/vfs"
)

// env is a metadata server, a client of it and a WebDAV gateway over it
// on a loopback port.
type env struct {
	c   *client.Client
	ctx context.Context
	url string
}

func start(t *testing.T, users map[string]string) *env {
	t.Helper()
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), FS: vfs.NewMem()})
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	srv := httptest.NewServer(webdav.Handler(webdav.Config{Client: c, Users: users}))
	t.Cleanup(srv.Close)
	return &env{c: c, ctx: ctx, url: srv.URL}
}

// do sends one request and returns its status and body.
func (e *env) do(t *testing.T, method, p string, body string, hdr ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+p, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) want(t *testing.T, status int, method, p, body string, hdr ...string) string {
	t.Helper()
	got, b := e.do(t, method, p, body, hdr...)
	if got != status {
		t.Fatalf("%s %s: status %d, want %d; body %q", method, p, got, status, b)
	}
	return b
}

func TestMethods(t *testing.T) {
	e := start(t, nil)
	e.want(t, http.StatusCreated, "MKCOL", "/docs", "")
	e.want(t, http.StatusMethodNotAllowed, "MKCOL", "/docs", "")
	e.want(t, http.StatusConflict, "MKCOL", "/no/such", "")
	e.want(t, http.StatusCreated, "PUT", "/docs/a.txt", "hello, canopy")
	if got := e.want(t, http.StatusOK, "GET", "/docs/a.txt", ""); got != "hello, canopy" {
		t.Fatalf("GET = %q", got)
	}
	// What the gateway wrote, the SDK reads, and the reverse.
	if b, err := e.c.ReadFile(e.ctx, "/docs/a.txt"); err != nil || string(b) != "hello, canopy" {
		t.Fatalf("SDK read %q, %v", b, err)
	}
	if err := e.c.WriteFile(e.ctx, "/docs/b.txt", []byte("from the SDK"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := e.want(t, http.StatusOK, "GET", "/docs/b.txt", ""); got != "from the SDK" {
		t.Fatalf("GET = %q", got)
	}
	if got := e.want(t, http.StatusPartialContent, "GET", "/docs/a.txt", "", "Range", "bytes=7-"); got != "canopy" {
		t.Fatalf("ranged GET = %q", got)
	}

	listing := e.want(t, http.StatusMultiStatus, "PROPFIND", "/docs", "", "Depth", "1")
	for _, want := range []string{"/docs/a.txt", "/docs/b.txt", "<D:getcontentlength>13</D:getcontentlength>"} {
		if !strings.Contains(listing, want) {
			t.Fatalf("PROPFIND lacks %q:\n%s", want, listing)
		}
	}

	// Dead properties are kept in the node's extended attributes.
	patch := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:test"><D:set><D:prop><Z:color>green</Z:color></D:prop></D:set></D:propertyupdate>`
	e.want(t, http.StatusMultiStatus, "PROPPATCH", "/docs/a.txt", patch)
	names, err := e.c.ListXattr(e.ctx, "/docs/a.txt")
	if err != nil || len(names) != 1 || !strings.HasPrefix(names[0], webdav.PropPrefix) {
		t.Fatalf("xattrs after PROPPATCH: %q, %v", names, err)
	}
	find := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><Z:color xmlns:Z="urn:test"/></D:prop></D:propfind>`
	if got := e.want(t, http.StatusMultiStatus, "PROPFIND", "/docs/a.txt", find, "Depth", "0"); !strings.Contains(got, "green") {
		t.Fatalf("PROPFIND of a dead property:\n%s", got)
	}

	e.want(t, http.StatusCreated, "COPY", "/docs/a.txt", "", "Destination", e.url+"/docs/c.txt")
	if got := e.want(t, http.StatusMultiStatus, "PROPFIND", "/docs/c.txt", find, "Depth", "0"); !strings.Contains(got, "green") {
		t.Fatalf("COPY did not carry the property:\n%s", got)
	}
	e.want(t, http.StatusPreconditionFailed, "MOVE", "/docs/c.txt", "", "Destination", e.url+"/docs/b.txt", "Overwrite", "F")
	e.want(t, http.StatusCreated, "MOVE", "/docs/c.txt", "", "Destination", e.url+"/moved.txt")
	if _, err := e.c.Stat(e.ctx, "/docs/c.txt"); !os.IsNotExist(err) {
		t.Fatalf("after MOVE the source: %v", err)
	}
	if b, err := e.c.ReadFile(e.ctx, "/moved.txt"); err != nil || string(b) != "hello, canopy" {
		t.Fatalf("after MOVE the destination: %q, %v", b, err)
	}

	// A locked file takes writes only with its lock token.
	lock := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>t</D:owner></D:lockinfo>`
	req, _ := http.NewRequest("LOCK", e.url+"/docs/a.txt", strings.NewReader(lock))
	req.Header.Set("Timeout", "Second-60")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	token := resp.Header.Get("Lock-Token")
	if resp.StatusCode != http.StatusOK || token == "" {
		t.Fatalf("LOCK: status %d, token %q", resp.StatusCode, token)
	}
	e.want(t, http.StatusLocked, "PUT", "/docs/a.txt", "overwritten")
	e.want(t, http.StatusLocked, "DELETE", "/docs/a.txt", "")
	e.want(t, http.StatusCreated, "PUT", "/docs/a.txt", "with the token", "If", "("+token+")")
	e.want(t, http.StatusNoContent, "UNLOCK", "/docs/a.txt", "", "Lock-Token", token)
	e.want(t, http.StatusNoContent, "DELETE", "/docs/a.txt", "")
	if _, err := e.c.Stat(e.ctx, "/docs/a.txt"); !os.IsNotExist(err) {
		t.Fatalf("after DELETE: %v", err)
	}

	e.want(t, http.StatusNoContent, "DELETE", "/docs", "")
	if _, err := e.c.Stat(e.ctx, "/docs"); !os.IsNotExist(err) {
		t.Fatalf("after DELETE of a collection: %v", err)
	}
	e.want(t, http.StatusNotFound, "GET", "/docs/b.txt", "")
}

func TestBasicAuth(t *testing.T) {
	e := start(t, map[string]string{"alice": "s3cret"})
	e.want(t, http.StatusUnauthorized, "PROPFIND", "/", "", "Depth", "0")
	req, _ := http.NewRequest("PUT", e.url+"/f", bytes.NewReader([]byte("x")))
	req.SetBasicAuth("alice", "wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password: status %d", resp.StatusCode)
	}
	if _, err := e.c.Stat(e.ctx, "/f"); !os.IsNotExist(err) {
		t.Fatalf("a refused PUT wrote: %v", err)
	}
	req, _ = http.NewRequest("PUT", e.url+"/f", bytes.NewReader([]byte("x")))
	req.SetBasicAuth("alice", "s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("right password: status %d", resp.StatusCode)
	}
}

func TestParseUsers(t *testing.T) {
	u, err := webdav.ParseUsers([]string{"a:b:c", "d:"})
	if err != nil || u["a"] != "b:c" || u["d"] != "" || len(u) != 2 {
		t.Fatalf("ParseUsers = %v, %v", u, err)
	}
	if _, err := webdav.ParseUsers([]string{"nocolon"}); err == nil {
		t.Fatal("ParseUsers accepted a user without a password")
	}
}

// TestLitmus runs the litmus WebDAV suite against the gateway, when it is
// installed (Debian package litmus).
func TestLitmus(t *testing.T) {
	bin, err := exec.LookPath("litmus")
	if err != nil {
		t.Skip("litmus is not installed (apt-get install litmus)")
	}
	if testing.Short() {
		t.Skip("litmus takes a while")
	}
	e := start(t, map[string]string{"litmus": "pw"})
	if _, err := e.c.Mkdir(e.ctx, "/litmus", 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(e.ctx, bin, e.url+"/litmus/", "litmus", "pw")
	cmd.Env = append(os.Environ(), "TESTS=basic copymove props locks http", "HOME="+t.TempDir())
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	t.Logf("litmus:\n%s", out)
	if err != nil {
		t.Fatalf("litmus failed: %v", err)
	}
	for _, suite := range []string{"basic", "copymove", "props", "locks", "http"} {
		if !strings.Contains(string(out), "-> running `"+suite+"'") {
			t.Errorf("litmus did not run %s", suite)
		}
	}
	if strings.Contains(string(out), "FAIL") {
		t.Error("litmus reports a failure")
	}
}
