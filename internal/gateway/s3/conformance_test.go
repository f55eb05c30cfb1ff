package s3_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestURLEncodedListing lists keys that need escaping with
// encoding-type=url: the keys and prefixes come back encoded, and the
// response says so.
func TestURLEncodedListing(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "enc")
	e.put(t, "enc", "a b+c%d", "x")
	e.put(t, "enc", "dir é/f", "y")
	out, err := e.s3.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("enc"), Delimiter: aws.String("/"),
		EncodingType: types.EncodingTypeUrl})
	if err != nil {
		t.Fatal(err)
	}
	if out.EncodingType != types.EncodingTypeUrl || len(out.Contents) != 1 || len(out.CommonPrefixes) != 1 {
		t.Fatalf("listing: %+v", out)
	}
	if k := aws.ToString(out.Contents[0].Key); k != "a%20b%2Bc%25d" {
		t.Fatalf("key %q, not url-encoded", k)
	}
	if p := aws.ToString(out.CommonPrefixes[0].Prefix); p != "dir%20%C3%A9/" {
		t.Fatalf("prefix %q, not url-encoded", p)
	}
	plain, err := e.s3.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("enc")})
	if err != nil || len(plain.Contents) != 2 || aws.ToString(plain.Contents[0].Key) != "a b+c%d" || plain.EncodingType != "" {
		t.Fatalf("plain listing: %+v, %v", plain, err)
	}
	v1, err := e.s3.ListObjects(e.ctx, &s3.ListObjectsInput{Bucket: aws.String("enc"), EncodingType: types.EncodingTypeUrl})
	if err != nil || len(v1.Contents) != 2 || aws.ToString(v1.Contents[1].Key) != "dir%20%C3%A9/f" {
		t.Fatalf("V1 listing: %+v, %v", v1, err)
	}
	for _, k := range []string{"u", "u"} {
		if _, err := e.s3.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("enc"), Key: aws.String(k + " 1")}); err != nil {
			t.Fatal(err)
		}
	}
	ups, err := e.s3.ListMultipartUploads(e.ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("enc"), EncodingType: types.EncodingTypeUrl})
	if err != nil || len(ups.Uploads) != 2 || aws.ToString(ups.Uploads[0].Key) != "u%201" || ups.EncodingType != types.EncodingTypeUrl {
		t.Fatalf("uploads: %+v, %v", ups, err)
	}
	if aws.ToString(ups.Uploads[0].UploadId) >= aws.ToString(ups.Uploads[1].UploadId) {
		t.Fatal("uploads of one key not listed in the order they were made")
	}
}

// TestStorageClass accepts the classes S3 names, refuses others, and
// reports every object as STANDARD.
func TestStorageClass(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "sclass")
	for _, sc := range []types.StorageClass{types.StorageClassReducedRedundancy, types.StorageClassStandard, types.StorageClassGlacierIr} {
		if _, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("sclass"), Key: aws.String(string(sc)),
			Body: strings.NewReader("x"), StorageClass: sc}); err != nil {
			t.Fatalf("put with storage class %s: %v", sc, err)
		}
	}
	if _, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("sclass"), Key: aws.String("bad"),
		Body: strings.NewReader("x"), StorageClass: "NO_SUCH_CLASS"}); code(err) != "InvalidStorageClass" {
		t.Fatalf("put with an invalid storage class: %v", err)
	}
	if _, err := e.s3.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("sclass"), Key: aws.String("bad"),
		StorageClass: "NO_SUCH_CLASS"}); code(err) != "InvalidStorageClass" {
		t.Fatalf("upload with an invalid storage class: %v", err)
	}
	if _, err := e.s3.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("sclass"), Key: aws.String("bad"),
		CopySource: aws.String("sclass/STANDARD"), StorageClass: "NO_SUCH_CLASS"}); code(err) != "InvalidStorageClass" {
		t.Fatalf("copy with an invalid storage class: %v", err)
	}
	h, err := e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("sclass"), Key: aws.String("REDUCED_REDUNDANCY")})
	if err != nil || h.StorageClass != "" {
		t.Fatalf("head: storage class %q, %v", h.StorageClass, err)
	}
	l, err := e.s3.ListObjectsV2(e.ctx, &s3.ListObjectsV2Input{Bucket: aws.String("sclass")})
	if err != nil || len(l.Contents) != 3 || l.Contents[0].StorageClass != types.ObjectStorageClassStandard {
		t.Fatalf("listing: %+v, %v", l, err)
	}
}

// TestBucketTagging sets, reads and removes a bucket's tags.
func TestBucketTagging(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "tags")
	b := aws.String("tags")
	if _, err := e.s3.GetBucketTagging(e.ctx, &s3.GetBucketTaggingInput{Bucket: b}); code(err) != "NoSuchTagSet" {
		t.Fatalf("tags of an untagged bucket: %v", err)
	}
	if _, err := e.s3.PutBucketTagging(e.ctx, &s3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: []types.Tag{
		{Key: aws.String("team"), Value: aws.String("a b+c")}, {Key: aws.String("env"), Value: aws.String("")},
	}}}); err != nil {
		t.Fatal(err)
	}
	out, err := e.s3.GetBucketTagging(e.ctx, &s3.GetBucketTaggingInput{Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tg := range out.TagSet {
		got[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if len(got) != 2 || got["team"] != "a b+c" || got["env"] != "" {
		t.Fatalf("tags: %v", got)
	}
	if _, err := e.s3.DeleteBucketTagging(e.ctx, &s3.DeleteBucketTaggingInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s3.GetBucketTagging(e.ctx, &s3.GetBucketTaggingInput{Bucket: b}); code(err) != "NoSuchTagSet" {
		t.Fatalf("tags after removal: %v", err)
	}
	if _, err := e.s3.GetBucketTagging(e.ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("none")}); code(err) != "NoSuchBucket" {
		t.Fatalf("tags of a missing bucket: %v", err)
	}
}

// TestPutPreconditions: If-Match needs the object, If-None-Match with an
// ETag fails only on an object with that ETag.
func TestPutPreconditions(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "pre")
	put := func(key string, ifMatch, ifNoneMatch *string) error {
		_, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("pre"), Key: aws.String(key),
			Body: strings.NewReader(key), IfMatch: ifMatch, IfNoneMatch: ifNoneMatch})
		return err
	}
	if err := put("k", aws.String(`"abc"`), nil); code(err) != "NoSuchKey" {
		t.Fatalf("If-Match on a missing object: %v", err)
	}
	if err := put("k", nil, aws.String(`"abc"`)); err != nil {
		t.Fatalf("If-None-Match with an ETag on a missing object: %v", err)
	}
	etag := `"` + md5hex("k") + `"`
	if err := put("k", nil, aws.String(etag)); code(err) != "PreconditionFailed" {
		t.Fatalf("If-None-Match with the object's ETag: %v", err)
	}
	if err := put("k", nil, aws.String("*")); code(err) != "PreconditionFailed" {
		t.Fatalf("If-None-Match * on an object: %v", err)
	}
	if err := put("k", aws.String(`"other"`), nil); code(err) != "PreconditionFailed" {
		t.Fatalf("If-Match with another ETag: %v", err)
	}
	if err := put("k", aws.String(etag), aws.String(`"other"`)); err != nil {
		t.Fatalf("If-Match with the ETag and If-None-Match with another: %v", err)
	}
}

// TestCopyShares: CopyObject of an object with a known MD5 shares its
// slices (no byte copied), keeps the ETag and reads the same; a copy that
// must compute a checksum copies the bytes.
func TestCopyShares(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "copies")
	body := strings.Repeat("shared bytes ", 100000)
	e.put(t, "copies", "src", body)
	out, err := e.s3.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("copies"), Key: aws.String("dir/dst"),
		CopySource: aws.String("copies/src")})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"` + md5hex(body) + `"`; aws.ToString(out.CopyObjectResult.ETag) != want {
		t.Fatalf("copy's ETag %s, want %s", aws.ToString(out.CopyObjectResult.ETag), want)
	}
	if e.get(t, "copies", "dir/dst") != body {
		t.Fatal("the copy reads differently")
	}
	srcIDs := map[uint64]bool{}
	for _, id := range sliceIDs(t, e, "/copies/src") {
		srcIDs[id] = true
	}
	for _, id := range sliceIDs(t, e, "/copies/dir/dst") {
		if !srcIDs[id] {
			t.Fatalf("the copy has slice %d, which the source has not: its bytes were copied", id)
		}
	}
	h, err := e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("copies"), Key: aws.String("dir/dst")})
	if err != nil || aws.ToString(h.ETag) != `"`+md5hex(body)+`"` {
		t.Fatalf("head of the copy: %+v, %v", h, err)
	}
	if _, err := e.s3.CopyObject(e.ctx, &s3.CopyObjectInput{Bucket: aws.String("copies"), Key: aws.String("summed"),
		CopySource: aws.String("copies/src"), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32}); err != nil {
		t.Fatal(err)
	}
	for _, id := range sliceIDs(t, e, "/copies/summed") {
		if srcIDs[id] {
			t.Fatalf("a copy that computes a checksum shares slice %d", id)
		}
	}
	if e.get(t, "copies", "summed") != body {
		t.Fatal("the checksummed copy reads differently")
	}
}
