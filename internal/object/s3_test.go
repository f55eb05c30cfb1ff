package object_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/canopyfs/canopy/internal/object"
)

// startS3 serves the S3 protocol from memory on 127.0.0.1 for the test.
func startS3(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	return srv.URL
}

func newS3(t *testing.T, cfg object.S3Config) object.Store {
	t.Helper()
	s, err := object.NewS3(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestS3(t *testing.T) { testS3At(t, startS3(t), "test-key", "test-secret") }

// testS3At runs the store's suite against the S3 server at endpoint, a
// new bucket for each case.
func testS3At(t *testing.T, endpoint, accessKey, secretKey string) {
	var n atomic.Int64
	testStore(t, func(t *testing.T) object.Store {
		return newS3(t, object.S3Config{
			Endpoint:     endpoint,
			Bucket:       fmt.Sprintf("canopy-%d", n.Add(1)),
			AccessKey:    accessKey,
			SecretKey:    secretKey,
			PathStyle:    true,
			CreateBucket: true,
		})
	})
}

func TestS3WithPrefix(t *testing.T) {
	endpoint := startS3(t)
	var n atomic.Int64
	testStore(t, func(t *testing.T) object.Store {
		// All stores share one bucket; the prefix keeps them apart.
		return newS3(t, object.S3Config{
			Endpoint:     endpoint,
			Bucket:       "shared",
			Prefix:       fmt.Sprintf("/tenant/%d/", n.Add(1)),
			AccessKey:    "test-key",
			SecretKey:    "test-secret",
			PathStyle:    true,
			CreateBucket: true,
		})
	})
}

func TestS3Prefix(t *testing.T) {
	endpoint := startS3(t)
	cfg := object.S3Config{Endpoint: endpoint, Bucket: "bkt", PathStyle: true, CreateBucket: true, AccessKey: "k", SecretKey: "s"}
	root := newS3(t, cfg)
	cfg.Prefix = "one"
	one := newS3(t, cfg)
	cfg.Prefix = "two/x"
	two := newS3(t, cfg)
	mustPut(t, one, "k", []byte("1"))
	mustPut(t, two, "k", []byte("2"))
	mustPut(t, root, "k", []byte("0"))
	if got := keys(mustList(t, root, "", "", 0)); !slices.Equal(got, []string{"k", "one/k", "two/x/k"}) {
		t.Fatalf("root list: %q", got)
	}
	if got := keys(mustList(t, one, "", "", 0)); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("prefixed list: %q", got)
	}
	if got := mustGet(t, two, "k", 0, -1); string(got) != "2" {
		t.Fatalf("prefixed get: %q", got)
	}
	if got, want := two.String(), "s3://bkt/two/x at "+endpoint; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if got, want := root.String(), "s3://bkt at "+endpoint; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestS3MissingBucket(t *testing.T) {
	endpoint := startS3(t)
	_, err := object.NewS3(context.Background(), object.S3Config{
		Endpoint: endpoint, Bucket: "absent", PathStyle: true, AccessKey: "k", SecretKey: "very-secret",
	})
	if err == nil {
		t.Fatal("NewS3 on a missing bucket succeeded")
	}
	if strings.Contains(err.Error(), "very-secret") {
		t.Fatalf("error shows the secret: %v", err)
	}
	for _, cfg := range []object.S3Config{
		{Endpoint: endpoint},                      // no bucket
		{Endpoint: "127.0.0.1:9000", Bucket: "b"}, // no scheme
		{Endpoint: endpoint, Bucket: "b", Prefix: "a/../b"},
	} {
		if _, err := object.NewS3(context.Background(), cfg); err == nil {
			t.Fatalf("NewS3(%+v) succeeded", cfg)
		}
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	local, err := object.Open(ctx, "file://"+filepath.Join(dir, "viaurl"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "file://" + filepath.Join(dir, "viaurl"); local.String() != want {
		t.Fatalf("String() = %q, want %q", local.String(), want)
	}
	mustPut(t, local, "a/b", []byte("file url"))

	bare, err := object.Open(ctx, filepath.Join(dir, "viaurl"))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, bare, "a/b", 0, -1); string(got) != "file url" {
		t.Fatalf("bare path store: %q", got)
	}

	endpoint := startS3(t)
	q := "?endpoint=" + url.QueryEscape(endpoint) + "&region=us-east-1&path_style=true&create_bucket=true"

	// Keys in the URL; the secret holds characters that need escaping.
	withKeys, err := object.Open(ctx, "s3://"+url.UserPassword("AKID", "se/cr+et").String()+"@bucket-a/some/prefix"+q)
	if err != nil {
		t.Fatal(err)
	}
	if want := "s3://bucket-a/some/prefix at " + endpoint; withKeys.String() != want {
		t.Fatalf("String() = %q, want %q", withKeys.String(), want)
	}
	mustPut(t, withKeys, "k", []byte("s3 url"))
	if got := mustGet(t, withKeys, "k", 0, -1); string(got) != "s3 url" {
		t.Fatalf("s3 store: %q", got)
	}

	// Keys from the environment; path style follows from the endpoint.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	fromEnv, err := object.Open(ctx, "s3://bucket-a/some?endpoint="+url.QueryEscape(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(mustList(t, fromEnv, "", "", 0)); !slices.Equal(got, []string{"prefix/k"}) {
		t.Fatalf("list through the second store: %q", got)
	}

	for _, bad := range []string{
		"",
		"ftp://host/x",
		"file://remotehost/x",
		"file:///x?y=1",
		"s3:///prefix" + q,
		"s3://bucket-b" + q + "&colour=blue",
		"s3://bucket-b?path_style=maybe&endpoint=" + url.QueryEscape(endpoint),
		"s3://bucket-b" + q + "&region=eu-west-1", // given twice
		"s3://bucket-missing?endpoint=" + url.QueryEscape(endpoint),
	} {
		if s, err := object.Open(ctx, bad); err == nil {
			t.Errorf("Open(%q) = %s, want an error", bad, s)
		}
	}
	_, err = object.Open(ctx, "s3://AKID:hidden@bucket-b?colour=blue")
	if err == nil || strings.Contains(err.Error(), "hidden") {
		t.Fatalf("error for a bad URL with a secret: %v", err)
	}
	if errors.Is(err, object.ErrNotFound) {
		t.Fatalf("bad URL reported as a missing object: %v", err)
	}
}
