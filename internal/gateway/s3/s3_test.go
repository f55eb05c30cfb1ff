package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopyfs/canopy/client"
	gws3 "github.com/canopyfs/canopy/internal/gateway/s3"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
	"github.com/canopyfs/canopy/internal/vfs"
)

const (
	access = "AKCANOPYTEST"
	secret = "canopy-test-secret-key"
)

// env is a metadata server, an SDK client of it, an S3 gateway over it
// on a loopback port and an AWS SDK client of the gateway.
type env struct {
	c   *client.Client
	ctx context.Context
	url string
	s3  *s3.Client
}

func start(t testing.TB) *env { return startWith(t, nil) }

// startWith is start with the metadata server's metrics registered in reg
// (nil: nowhere).
func startWith(t testing.TB, reg prometheus.Registerer) *env {
	t.Helper()
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), FS: vfs.NewMem(), Metrics: reg})
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	gw, err := gws3.Start(gws3.Config{Client: c, Listen: "127.0.0.1:0",
		Keys: gws3.NewKeyring(gws3.Key{Access: access, Secret: secret})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	url := "http://" + gw.Addr().String()
	return &env{c: c, ctx: ctx, url: url, s3: newS3(url, access, secret)}
}

func newS3(url, key, secretKey string) *s3.Client {
	return s3.New(s3.Options{
		Region: gws3.Region, BaseEndpoint: aws.String(url), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(key, secretKey, ""),
	})
}

// code is the S3 error code of err, or "" if it has none.
func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func (e *env) put(t *testing.T, bucket, key, body string) *s3.PutObjectOutput {
	t.Helper()
	out, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(body)})
	if err != nil {
		t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
	return out
}

func (e *env) get(t *testing.T, bucket, key string) string {
	t.Helper()
	out, err := e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (e *env) mkbucket(t *testing.T, bucket string) {
	t.Helper()
	if _, err := e.s3.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// sliceIDs returns the ids of the slices file p's first chunks are made of.
func sliceIDs(t *testing.T, e *env, p string) []uint64 {
	t.Helper()
	fi, err := e.c.Stat(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := e.c.Chunks(e.ctx, fi.Ino(), 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, ch := range chunks {
		for _, s := range ch.Slices {
			if s.ID != 0 {
				ids = append(ids, s.ID)
			}
		}
	}
	if len(ids) == 0 {
		t.Fatalf("%s has no slices", p)
	}
	return ids
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestObjects(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "photos")
	if _, err := e.s3.CreateBucket(e.ctx, &s3.CreateBucketInput{Bucket: aws.String("photos")}); code(err) != "BucketAlreadyOwnedByYou" {
		t.Fatalf("second create: %v", err)
	}
	lb, err := e.s3.ListBuckets(e.ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || *lb.Buckets[0].Name != "photos" {
		t.Fatalf("list buckets: %+v, %v", lb, err)
	}

	out, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{
		Bucket: aws.String("photos"), Key: aws.String("2024/june/a.txt"), Body: strings.NewReader("hello, canopy"),
		ContentType: aws.String("text/plain"), Metadata: map[string]string{"camera": "x100"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"` + md5hex("hello, canopy") + `"`; *out.ETag != want {
		t.Fatalf("ETag %s, want %s", *out.ETag, want)
	}
	// The object is a file of the namespace, its metadata xattrs.
	if b, err := e.c.ReadFile(e.ctx, "/photos/2024/june/a.txt"); err != nil || string(b) != "hello, canopy" {
		t.Fatalf("SDK read %q, %v", b, err)
	}
	if v, err := e.c.GetXattr(e.ctx, "/photos/2024/june/a.txt", "user.s3.content-type"); err != nil || string(v) != "text/plain" {
		t.Fatalf("content type xattr %q, %v", v, err)
	}

	head, err := e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/june/a.txt")})
	if err != nil {
		t.Fatal(err)
	}
	if *head.ContentLength != 13 || *head.ContentType != "text/plain" || head.Metadata["camera"] != "x100" || *head.ETag != *out.ETag {
		t.Fatalf("head: length %d, type %q, metadata %v, etag %s", *head.ContentLength, *head.ContentType, head.Metadata, *head.ETag)
	}
	rg, err := e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/june/a.txt"), Range: aws.String("bytes=7-12")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rg.Body)
	rg.Body.Close()
	if string(b) != "canopy" || *rg.ContentRange != "bytes 7-12/13" {
		t.Fatalf("range: %q, %s", b, *rg.ContentRange)
	}

	// Conditional reads.
	_, err = e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/june/a.txt"), IfMatch: aws.String(`"0123"`)})
	if code(err) != "PreconditionFailed" {
		t.Fatalf("If-Match of another ETag: %v", err)
	}
	_, err = e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/june/a.txt"), IfNoneMatch: out.ETag})
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusNotModified {
		t.Fatalf("If-None-Match of its ETag: %v", err)
	}
	if _, err := e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/june/a.txt"), IfMatch: out.ETag}); err != nil {
		t.Fatalf("If-Match of its ETag: %v", err)
	}
	_, err = e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("nope")})
	if code(err) != "NoSuchKey" {
		t.Fatalf("get of a missing key: %v", err)
	}
	_, err = e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("nobucket"), Key: aws.String("x")})
	if code(err) != "NoSuchBucket" {
		t.Fatalf("get in a missing bucket: %v", err)
	}

	// Copy, with the metadata and with new metadata.
	if _, err := e.s3.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("photos"), Key: aws.String("copy.txt"),
		CopySource: aws.String("photos/2024/june/a.txt")}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, "photos", "copy.txt"); got != "hello, canopy" {
		t.Fatalf("copy holds %q", got)
	}
	ch, err := e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String("copy.txt")})
	if err != nil || ch.Metadata["camera"] != "x100" || *ch.ETag != *out.ETag {
		t.Fatalf("copy's head: %+v, %v", ch, err)
	}
	if _, err := e.s3.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("photos"), Key: aws.String("copy.txt"),
		CopySource: aws.String("photos/copy.txt"), MetadataDirective: types.MetadataDirectiveReplace,
		Metadata: map[string]string{"lens": "23mm"}}); err != nil {
		t.Fatal(err)
	}
	ch, err = e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String("copy.txt")})
	if err != nil || ch.Metadata["lens"] != "23mm" || ch.Metadata["camera"] != "" {
		t.Fatalf("after replacing metadata: %v, %v", ch.Metadata, err)
	}

	// Files written with the SDK are objects; a file changed after the
	// gateway wrote it loses its stale MD5.
	if err := e.c.WriteFile(e.ctx, "/photos/sdk.txt", []byte("from the SDK"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, "photos", "sdk.txt"); got != "from the SDK" {
		t.Fatalf("SDK file as object: %q", got)
	}
	if err := e.c.WriteFile(e.ctx, "/photos/copy.txt", []byte("rewritten"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch, err = e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String("copy.txt")})
	if err != nil || *ch.ETag == *out.ETag || *ch.ContentLength != 9 {
		t.Fatalf("head after an SDK rewrite: %v, %v", ch, err)
	}

	// Deletes, one and many; the directories they empty go too.
	if _, err := e.s3.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/june/a.txt")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Stat(e.ctx, "/photos/2024"); err == nil {
		t.Fatal("delete left the empty directories behind")
	}
	if _, err := e.s3.DeleteObject(e.ctx, &s3.DeleteObjectInput{Bucket: aws.String("photos"), Key: aws.String("never")}); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}
	md, err := e.s3.DeleteObjects(e.ctx, &s3.DeleteObjectsInput{Bucket: aws.String("photos"), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("copy.txt")}, {Key: aws.String("sdk.txt")}}}})
	if err != nil || len(md.Deleted) != 2 || len(md.Errors) != 0 {
		t.Fatalf("multi-delete: %+v, %v", md, err)
	}
	if _, err := e.s3.DeleteBucket(e.ctx, &s3.DeleteBucketInput{Bucket: aws.String("photos")}); err != nil {
		t.Fatalf("delete of the emptied bucket: %v", err)
	}
}

func TestHostileKeys(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "bkt")
	if _, err := e.c.Mkdir(e.ctx, "/outside", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"../outside/x", "a/../../outside/y", "a//b", "./x", "a/\x00b", strings.Repeat("k", 256), strings.Repeat("d/", 600), ".canopy-s3-uploads/x"} {
		_, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader("x")})
		if err == nil {
			t.Errorf("put %q succeeded", key)
		}
	}
	for _, dir := range []string{"/outside", "/bkt", "/"} {
		ents, err := e.c.ReadDir(e.ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range ents {
			if n := en.Name(); n != "outside" && n != "bkt" {
				t.Errorf("%s holds %q after hostile puts", dir, n)
			}
		}
		if dir != "/" && len(ents) != 0 {
			t.Errorf("%s is not empty after hostile puts", dir)
		}
	}
}

// TestFileDirectoryConflicts: a key cannot be both an object and the
// directory of others.
func TestFileDirectoryConflicts(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "bkt")
	e.put(t, "bkt", "dir/obj", "x")
	e.put(t, "bkt", "file", "y")
	_, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("dir"), Body: strings.NewReader("z")})
	if code(err) != "ExistingObjectIsDirectory" {
		t.Fatalf("object over a directory: %v", err)
	}
	_, err = e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("file/below"), Body: strings.NewReader("z")})
	if code(err) != "ObjectParentIsFile" {
		t.Fatalf("object below an object: %v", err)
	}
	if got := e.get(t, "bkt", "dir/obj") + e.get(t, "bkt", "file"); got != "xy" {
		t.Fatalf("after refused puts: %q", got)
	}
}

func TestAuth(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "bkt")
	e.put(t, "bkt", "k", "secret data")
	_, err := newS3(e.url, access, "wrong-secret").GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	if code(err) != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
	_, err = newS3(e.url, "AKUNKNOWN", secret).GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	if code(err) != "InvalidAccessKeyId" {
		t.Fatalf("unknown key: %v", err)
	}
	resp, err := http.Get(e.url + "/bkt/k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous get: %d", resp.StatusCode)
	}

	// Presigned URLs, for a read and a write.
	ps := s3.NewPresignClient(e.s3)
	get, err := ps.PresignGetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(get.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "secret data" {
		t.Fatalf("presigned get: %d %q", resp.StatusCode, body)
	}
	resp, err = http.Get(strings.Replace(get.URL, "X-Amz-Signature=", "X-Amz-Signature=0", 1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("presigned get with a tampered signature: %d", resp.StatusCode)
	}
	put, err := ps.PresignPutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("up")})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, put.URL, strings.NewReader("presigned"))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("presigned put: %d", resp.StatusCode)
	}
	if got := e.get(t, "bkt", "up"); got != "presigned" {
		t.Fatalf("after a presigned put: %q", got)
	}
}

func TestMultipart(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "bkt")
	key := "big/object.bin"
	cr, err := e.s3.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: &key,
		ContentType: aws.String("application/x-test")})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var whole []byte
	var done []types.CompletedPart
	var sums []byte
	for i, size := range []int{5 << 20, 5 << 20, 1 << 20} {
		part := make([]byte, size)
		for j := range part {
			part[j] = byte(rng.Uint32())
		}
		whole = append(whole, part...)
		sum := md5.Sum(part)
		sums = append(sums, sum[:]...)
		up, err := e.s3.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: &key, UploadId: cr.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(part)})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag})
	}
	lp, err := e.s3.ListParts(e.ctx, &s3.ListPartsInput{Bucket: aws.String("bkt"), Key: &key, UploadId: cr.UploadId})
	if err != nil || len(lp.Parts) != 3 || *lp.Parts[2].Size != 1<<20 {
		t.Fatalf("list parts: %+v, %v", lp, err)
	}
	lu, err := e.s3.ListMultipartUploads(e.ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("bkt")})
	if err != nil || len(lu.Uploads) != 1 || *lu.Uploads[0].Key != key {
		t.Fatalf("list uploads: %+v, %v", lu, err)
	}
	partIDs := map[uint64]bool{}
	for n := 1; n <= 3; n++ {
		for _, id := range sliceIDs(t, e, fmt.Sprintf("/bkt/.canopy-s3-uploads/%s/%05d", *cr.UploadId, n)) {
			partIDs[id] = true
		}
	}
	// Parts out of order are refused; the right list completes.
	_, err = e.s3.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: &key, UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{done[1], done[0]}}})
	if code(err) != "InvalidPartOrder" {
		t.Fatalf("complete out of order: %v", err)
	}
	comp, err := e.s3.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: &key, UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum(sums)
	if want := fmt.Sprintf(`"%x-3"`, sum); *comp.ETag != want {
		t.Fatalf("multipart ETag %s, want %s", *comp.ETag, want)
	}
	got, err := e.c.ReadFile(e.ctx, "/bkt/big/object.bin")
	if err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("SDK read of the object: %d bytes, %v", len(got), err)
	}
	// Completion is metadata only: the object is made of the parts' slices.
	for _, id := range sliceIDs(t, e, "/bkt/big/object.bin") {
		if !partIDs[id] {
			t.Fatalf("the object has slice %d, which no part had: its bytes were copied", id)
		}
	}
	head, err := e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: &key})
	if err != nil || *head.ETag != *comp.ETag || *head.ContentType != "application/x-test" {
		t.Fatalf("head: %+v, %v", head, err)
	}
	lu, err = e.s3.ListMultipartUploads(e.ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("bkt")})
	if err != nil || len(lu.Uploads) != 0 {
		t.Fatalf("uploads after completion: %+v, %v", lu.Uploads, err)
	}

	// An aborted upload leaves nothing.
	ab, err := e.s3.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("gone")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s3.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("gone"), UploadId: ab.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s3.AbortMultipartUpload(e.ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("gone"), UploadId: ab.UploadId}); err != nil {
		t.Fatal(err)
	}
	_, err = e.s3.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("gone"), UploadId: ab.UploadId,
		PartNumber: aws.Int32(2), Body: strings.NewReader("x")})
	if code(err) != "NoSuchUpload" {
		t.Fatalf("part of an aborted upload: %v", err)
	}
	ents, err := e.c.ReadDir(e.ctx, "/bkt/.canopy-s3-uploads")
	if err != nil || len(ents) != 0 {
		t.Fatalf("uploads directory after abort: %v, %v", ents, err)
	}
}

// listAll lists bucket with prefix and delimiter page by page, pageSize
// keys at a time, with V2 or V1, and returns the keys and common prefixes
// in the order they came.
func (e *env) listAll(t *testing.T, v1 bool, bucket, prefix, delim, startAfter string, pageSize int32) (keys, prefixes []string) {
	t.Helper()
	token, marker := "", startAfter
	for page := 0; ; page++ {
		if page > 100000 {
			t.Fatal("listing does not end")
		}
		var contents []types.Object
		var cps []types.CommonPrefix
		var truncated bool
		if v1 {
			out, err := e.s3.ListObjects(e.ctx, &s3.ListObjectsInput{Bucket: &bucket, Prefix: &prefix, Delimiter: &delim, Marker: &marker, MaxKeys: &pageSize})
			if err != nil {
				t.Fatal(err)
			}
			contents, cps, truncated = out.Contents, out.CommonPrefixes, *out.IsTruncated
			if truncated {
				if out.NextMarker != nil {
					marker = *out.NextMarker
				} else {
					marker = *contents[len(contents)-1].Key
				}
			}
		} else {
			in := &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, Delimiter: &delim, MaxKeys: &pageSize}
			if token != "" {
				in.ContinuationToken = &token
			} else if startAfter != "" {
				in.StartAfter = &startAfter
			}
			out, err := e.s3.ListObjectsV2(e.ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			contents, cps, truncated = out.Contents, out.CommonPrefixes, *out.IsTruncated
			if truncated {
				token = *out.NextContinuationToken
			}
		}
		if int32(len(contents)+len(cps)) > pageSize {
			t.Fatalf("page of %d, asked for %d", len(contents)+len(cps), pageSize)
		}
		for _, o := range contents {
			keys = append(keys, *o.Key)
		}
		for _, p := range cps {
			prefixes = append(prefixes, *p.Prefix)
		}
		if !truncated {
			return keys, prefixes
		}
	}
}

// want computes what a listing of keys should return.
func want(all []string, prefix, delim, after string) (keys, prefixes []string) {
	sorted := append([]string(nil), all...)
	sort.Strings(sorted)
	seen := map[string]bool{}
	for _, k := range sorted {
		if !strings.HasPrefix(k, prefix) || k <= after {
			continue
		}
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				cp := k[:len(prefix)+i+len(delim)]
				if !seen[cp] && cp > after {
					seen[cp] = true
					prefixes = append(prefixes, cp)
				}
				continue
			}
		}
		keys = append(keys, k)
	}
	return keys, prefixes
}
