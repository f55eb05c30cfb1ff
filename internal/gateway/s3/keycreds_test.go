package s3_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/canopyfs/canopy/client"
	gws3 "github.com/canopyfs/canopy/internal/gateway/s3"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// TestKeysMappedToCredentials: access keys with a credential's token make
// their requests under it, and the service holds them to it: a read-only
// key reads and changes nothing, a key scoped to one bucket sees only
// that bucket (its listing, its objects, made as the key's uid), and a
// removed credential stops its key.
func TestKeysMappedToCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := "file://" + t.TempDir()
	_, addr := servertest.Start(t, server.Config{Storage: store})
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, d := range []string{"/shared", "/tenant-a"} {
		if _, err := c.Mkdir(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Chown(ctx, "/tenant-a", 1500, 1500); err != nil {
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
	keys, err := gws3.ParseKeys(strings.NewReader("AKADMIN admin-secret\nAKRO ro-secret " + roToken + "\nAKA a-secret 1500 " + aToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gws3.Start(gws3.Config{Client: c, Listen: "127.0.0.1:0", Keys: keys,
		Dial: func(token string) (*client.Client, error) { return client.Dial(addr, client.Options{Token: token}) }})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	url := "http://" + gw.Addr().String()
	admin, ro, a := newS3(url, "AKADMIN", "admin-secret"), newS3(url, "AKRO", "ro-secret"), newS3(url, "AKA", "a-secret")
	put := func(cl *s3.Client, bucket, key string) error {
		_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("body")})
		return err
	}
	get := func(cl *s3.Client, bucket, key string) error {
		out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
		if err == nil {
			out.Body.Close()
		}
		return err
	}
	denied := func(what string, err error) {
		t.Helper()
		if code(err) != "AccessDenied" {
			t.Errorf("%s: %v (code %q), want AccessDenied", what, err, code(err))
		}
	}
	if err := put(admin, "shared", "obj"); err != nil {
		t.Fatalf("put by the gateway's own key: %v", err)
	}

	if err := get(ro, "shared", "obj"); err != nil {
		t.Errorf("get by the read-only key: %v", err)
	}
	denied("put by the read-only key", put(ro, "shared", "ro-put"))
	_, err = ro.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: ptr("shared"), Key: ptr("obj")})
	denied("delete by the read-only key", err)

	lb, err := a.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || *lb.Buckets[0].Name != "tenant-a" {
		t.Errorf("buckets of the scoped key: %v, %v; want [tenant-a]", lb, err)
	}
	if err := put(a, "tenant-a", "mine"); err != nil {
		t.Fatalf("put by the scoped key in its bucket: %v", err)
	}
	if fi, err := c.Stat(ctx, "/tenant-a/mine"); err != nil || fi.Attr().UID != 1500 {
		t.Errorf("the scoped key's object: %+v, %v; want /tenant-a/mine owned by 1500", fi, err)
	}
	denied("get outside the scoped key's bucket", get(a, "shared", "obj"))
	denied("put outside the scoped key's bucket", put(a, "shared", "stolen"))

	if ents, err := c.ReadDir(ctx, "/shared"); err != nil || len(ents) != 1 {
		t.Errorf("/shared after the refused writes: %d entries, %v; want only obj", len(ents), err)
	}
	if err := c.RemoveCredential(ctx, "ro"); err != nil {
		t.Fatal(err)
	}
	denied("get by the key of a removed credential", get(ro, "shared", "obj"))
}

func ptr(s string) *string { return &s }
