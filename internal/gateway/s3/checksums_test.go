package s3_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestChecksums: a PUT whose x-amz-checksum header does not match its
// body is refused and writes nothing; one that matches is kept and
// returned in checksum mode, until the file changes.
func TestChecksums(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "bkt")
	_, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("bad"),
		Body: strings.NewReader("payload"), ChecksumSHA256: aws.String("n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=")})
	if code(err) != "BadDigest" {
		t.Fatalf("put with a wrong checksum: %v", err)
	}
	if _, err := e.c.Stat(e.ctx, "/bkt/bad"); err == nil {
		t.Fatal("a refused put left its object")
	}
	sum := sha256.Sum256([]byte("payload"))
	want := base64.StdEncoding.EncodeToString(sum[:])
	out, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("good"),
		Body: strings.NewReader("payload"), ChecksumSHA256: &want})
	if err != nil || out.ChecksumSHA256 == nil || *out.ChecksumSHA256 != want {
		t.Fatalf("put with the right checksum: %+v, %v", out, err)
	}
	head, err := e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("good"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || head.ChecksumSHA256 == nil || *head.ChecksumSHA256 != want {
		t.Fatalf("head in checksum mode: %+v, %v", head, err)
	}
	if err := e.c.WriteFile(e.ctx, "/bkt/good", []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	head, err = e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("good"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || head.ChecksumSHA256 != nil {
		t.Fatalf("head after an SDK rewrite still has the old checksum: %+v, %v", head.ChecksumSHA256, err)
	}
}

// TestMultipartChecksum: an upload created with a checksum algorithm keeps
// each part's checksum and gives the object the composite one.
func TestMultipartChecksum(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "bkt")
	cr, err := e.s3.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k"),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	var done []types.CompletedPart
	var sums []byte
	for i, data := range [][]byte{bytes.Repeat([]byte{'a'}, 5<<20), []byte("tail")} {
		sum := sha256.Sum256(data)
		sums = append(sums, sum[:]...)
		b64 := base64.StdEncoding.EncodeToString(sum[:])
		up, err := e.s3.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: cr.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(data), ChecksumSHA256: &b64})
		if err != nil {
			t.Fatal(err)
		}
		if up.ChecksumSHA256 == nil || *up.ChecksumSHA256 != b64 {
			t.Fatalf("part %d checksum %v, want %s", i+1, up.ChecksumSHA256, b64)
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag, ChecksumSHA256: &b64})
	}
	comp, err := e.s3.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k"),
		UploadId: cr.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	whole := sha256.Sum256(sums)
	want := base64.StdEncoding.EncodeToString(whole[:]) + "-2"
	if comp.ChecksumSHA256 == nil || *comp.ChecksumSHA256 != want {
		t.Fatalf("composite checksum %v, want %s", comp.ChecksumSHA256, want)
	}
	head, err := e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || head.ChecksumSHA256 == nil || *head.ChecksumSHA256 != want || head.ChecksumType != types.ChecksumTypeComposite {
		t.Fatalf("head in checksum mode: %v %v, %v", head.ChecksumSHA256, head.ChecksumType, err)
	}
}
