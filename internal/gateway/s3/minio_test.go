package s3_test

import (
	"bytes"
	"crypto/md5"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func newMinio(t *testing.T, e *env, key, secretKey string) *minio.Client {
	t.Helper()
	mc, err := minio.New(strings.TrimPrefix(e.url, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(key, secretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// TestMinio drives the gateway with minio-go: a 100 MiB object in 5 MiB
// parts, stat, ranged read, listing, removal of many, a presigned URL and
// a wrong secret.
func TestMinio(t *testing.T) {
	e := start(t)
	mc := newMinio(t, e, access, secret)
	if err := mc.MakeBucket(e.ctx, "minio", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	size := 100 << 20
	if testing.Short() {
		size = 12 << 20
	}
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{7}).Read(data)
	info, err := mc.PutObject(e.ctx, "minio", "big/blob", bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{PartSize: 5 << 20, ContentType: "application/octet-stream", UserMetadata: map[string]string{"origin": "minio"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (size + 5<<20 - 1) / (5 << 20); !strings.HasSuffix(info.ETag, "-"+strconv.Itoa(want)) {
		t.Fatalf("ETag %s is not of a %d-part upload", info.ETag, want)
	}
	st, err := mc.StatObject(e.ctx, "minio", "big/blob", minio.StatObjectOptions{})
	if err != nil || st.Size != int64(size) || st.UserMetadata["Origin"] != "minio" {
		t.Fatalf("stat: %+v, %v", st, err)
	}
	obj, err := mc.GetObject(e.ctx, "minio", "big/blob", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := md5.New()
	if _, err := io.Copy(h, obj); err != nil {
		t.Fatal(err)
	}
	obj.Close()
	if want := md5.Sum(data); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatal("the object read back differs")
	}
	var opts minio.GetObjectOptions
	opts.SetRange(1000, 1999)
	obj, err = mc.GetObject(e.ctx, "minio", "big/blob", opts)
	if err != nil {
		t.Fatal(err)
	}
	part, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(part, data[1000:2000]) {
		t.Fatalf("ranged read: %d bytes, %v", len(part), err)
	}

	for _, k := range []string{"small/a", "small/b", "small/c/d"} {
		if _, err := mc.PutObject(e.ctx, "minio", k, strings.NewReader(k), int64(len(k)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for o := range mc.ListObjects(e.ctx, "minio", minio.ListObjectsOptions{Prefix: "small/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, ",") != "small/a,small/b,small/c/d" {
		t.Fatalf("recursive listing: %v", keys)
	}
	keys = nil
	for o := range mc.ListObjects(e.ctx, "minio", minio.ListObjectsOptions{Prefix: "small/"}) {
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, ",") != "small/a,small/b,small/c/" {
		t.Fatalf("listing by directory: %v", keys)
	}

	u, err := mc.PresignedGetObject(e.ctx, "minio", "small/a", 60e9, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "small/a" {
		t.Fatalf("presigned get: %d %q", resp.StatusCode, b)
	}

	objs := make(chan minio.ObjectInfo, 4)
	for _, k := range []string{"small/a", "small/b", "small/c/d", "big/blob"} {
		objs <- minio.ObjectInfo{Key: k}
	}
	close(objs)
	for rerr := range mc.RemoveObjects(e.ctx, "minio", objs, minio.RemoveObjectsOptions{}) {
		t.Fatalf("remove %s: %v", rerr.ObjectName, rerr.Err)
	}
	ents, err := e.c.ReadDir(e.ctx, "/minio")
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range ents {
		if en.Name() != ".canopy-s3-uploads" {
			t.Fatalf("bucket after removing everything holds %q", en.Name())
		}
	}

	bad := newMinio(t, e, access, "not-the-secret")
	if _, err := bad.PutObject(e.ctx, "minio", "x", strings.NewReader("x"), 1, minio.PutObjectOptions{}); minio.ToErrorResponse(err).Code != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
}
