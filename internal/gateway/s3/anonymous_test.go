package s3_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/canopyfs/canopy/client"
	gws3 "github.com/canopyfs/canopy/internal/gateway/s3"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
	"github.com/canopyfs/canopy/internal/vfs"
)

// TestAnonymous: with anonymous access on, a request without credentials
// acts as nobody, and the namespace's permissions decide: it reads a
// world-readable object, not a 0600 one; it writes into a 0777 bucket
// (the object is nobody's) and not into a 0755 one; it lists a bucket but
// not the buckets. A signed request with a wrong secret is still refused.
func TestAnonymous(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), FS: vfs.NewMem()})
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	nobody, err := gws3.ParseAnonymous("65534")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gws3.Start(gws3.Config{Client: c, Listen: "127.0.0.1:0", Anonymous: &nobody,
		Keys: gws3.NewKeyring(gws3.Key{Access: access, Secret: secret})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "http://" + gw.Addr().String()
	e := &env{c: c, ctx: ctx, url: url, s3: newS3(url, access, secret)}

	e.mkbucket(t, "pub")
	e.mkbucket(t, "drop")
	e.put(t, "pub", "open", "for everyone")
	e.put(t, "pub", "closed", "for root")
	for p, mode := range map[string]uint32{"/pub": 0o755, "/pub/open": 0o644, "/pub/closed": 0o600, "/drop": 0o777} {
		if _, err := c.Chmod(ctx, p, mode); err != nil {
			t.Fatal(err)
		}
	}

	anon := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := anon("GET", "/pub/open", ""); st != http.StatusOK || body != "for everyone" {
		t.Errorf("anonymous GET of a 0644 object: %d %q", st, body)
	}
	if st, _ := anon("GET", "/pub/closed", ""); st != http.StatusForbidden {
		t.Errorf("anonymous GET of a 0600 object: %d, want 403", st)
	}
	if st, _ := anon("PUT", "/pub/new", "x"); st != http.StatusForbidden {
		t.Errorf("anonymous PUT into a 0755 bucket: %d, want 403", st)
	}
	if _, err := c.Stat(ctx, "/pub/new"); err == nil {
		t.Error("a refused anonymous PUT left an object")
	}
	if st, body := anon("PUT", "/drop/x", "dropped"); st != http.StatusOK {
		t.Errorf("anonymous PUT into a 0777 bucket: %d %s", st, body)
	}
	fi, err := c.Stat(ctx, "/drop/x")
	if err != nil {
		t.Fatal(err)
	}
	if a := fi.Attr(); a.UID != 65534 || a.GID != 65534 || fi.Size() != int64(len("dropped")) {
		t.Errorf("the anonymous object: uid %d gid %d size %d, want nobody's 7 bytes", a.UID, a.GID, fi.Size())
	}
	if st, body := anon("GET", "/pub?list-type=2", ""); st != http.StatusOK || !strings.Contains(body, "<Key>open</Key>") {
		t.Errorf("anonymous listing of a bucket: %d %s", st, body)
	}
	if st, _ := anon("GET", "/", ""); st != http.StatusForbidden {
		t.Errorf("anonymous listing of the buckets: %d, want 403", st)
	}
	if st, _ := anon("DELETE", "/drop/x", ""); st != http.StatusNoContent {
		t.Errorf("anonymous DELETE in a 0777 bucket: %d", st)
	}
	_, err = newS3(url, access, "wrong-secret").GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("pub"), Key: aws.String("open")})
	if code(err) != "SignatureDoesNotMatch" {
		t.Errorf("a wrong secret with anonymous access on: %v", err)
	}
}

func TestParseAnonymous(t *testing.T) {
	for in, want := range map[string]client.Cred{"65534": {UID: 65534, GID: 65534}, "1000:100": {UID: 1000, GID: 100}} {
		got, err := gws3.ParseAnonymous(in)
		if err != nil || got.UID != want.UID || got.GID != want.GID {
			t.Errorf("ParseAnonymous(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "nobody", "1:", "1:x", "-1", "4294967296"} {
		if _, err := gws3.ParseAnonymous(bad); err == nil {
			t.Errorf("ParseAnonymous(%q) accepted", bad)
		}
	}
}
