package s3_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestGetPart reads single parts of a multipart object back (GET and
// HEAD with partNumber): each part's bytes, its range, the object's
// count of parts and the part's checksum; a part past the last is
// refused, and an object written in one piece is its own part 1.
func TestGetPart(t *testing.T) {
	e := start(t)
	e.mkbucket(t, "bkt")
	cr, err := e.s3.CreateMultipartUpload(e.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	datas := [][]byte{bytes.Repeat([]byte{'a'}, 5<<20), bytes.Repeat([]byte{'b'}, 5<<20+7), []byte("the tail")}
	var done []types.CompletedPart
	var sums []string
	for i, data := range datas {
		sum := sha256.Sum256(data)
		b64 := base64.StdEncoding.EncodeToString(sum[:])
		sums = append(sums, b64)
		up, err := e.s3.UploadPart(e.ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: cr.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(data), ChecksumSHA256: &b64})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag, ChecksumSHA256: &b64})
	}
	comp, err := e.s3.CompleteMultipartUpload(e.ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
		UploadId: cr.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, d := range datas {
		total += int64(len(d))
	}
	start := int64(0)
	for i, data := range datas {
		n := aws.Int32(int32(i + 1))
		out, err := e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), PartNumber: n,
			ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatalf("get part %d: %v", *n, err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("part %d: %d bytes, want %d", *n, len(got), len(data))
		}
		wantRange := fmt.Sprintf("bytes %d-%d/%d", start, start+int64(len(data))-1, total)
		if aws.ToString(out.ContentRange) != wantRange || aws.ToInt32(out.PartsCount) != 3 || aws.ToString(out.ETag) != aws.ToString(comp.ETag) {
			t.Fatalf("part %d: range %q parts %d etag %s, want %q 3 %s", *n, aws.ToString(out.ContentRange), aws.ToInt32(out.PartsCount),
				aws.ToString(out.ETag), wantRange, aws.ToString(comp.ETag))
		}
		if aws.ToString(out.ChecksumSHA256) != sums[i] {
			t.Fatalf("part %d checksum %q, want %q", *n, aws.ToString(out.ChecksumSHA256), sums[i])
		}
		head, err := e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), PartNumber: n,
			ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatalf("head part %d: %v", *n, err)
		}
		if aws.ToInt64(head.ContentLength) != int64(len(data)) || aws.ToInt32(head.PartsCount) != 3 || aws.ToString(head.ChecksumSHA256) != sums[i] {
			t.Fatalf("head part %d: length %d parts %d checksum %q", *n, aws.ToInt64(head.ContentLength), aws.ToInt32(head.PartsCount),
				aws.ToString(head.ChecksumSHA256))
		}
		start += int64(len(data))
	}
	if _, err := e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), PartNumber: aws.Int32(4)}); code(err) != "InvalidPartNumber" {
		t.Fatalf("get part 4 of 3: %v", err)
	}
	// The whole object still reads whole, with its composite checksum.
	if got := e.get(t, "bkt", "mp"); int64(len(got)) != total || got[:1] != "a" || got[len(got)-8:] != "the tail" {
		t.Fatalf("whole object: %d bytes", len(got))
	}

	// An object of one piece is its own part 1, and has no part 2.
	e.put(t, "bkt", "one", "single piece")
	out, err := e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("one"), PartNumber: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(got) != "single piece" || out.PartsCount != nil {
		t.Fatalf("part 1 of a single object: %q, parts %v", got, out.PartsCount)
	}
	if _, err := e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("one"), PartNumber: aws.Int32(2)}); err == nil {
		t.Fatal("head of part 2 of a single object succeeded")
	}

	// A multipart object rewritten through the SDK is one piece again:
	// its parts record no longer describes it.
	if err := e.c.WriteFile(e.ctx, "/bkt/mp", []byte("rewritten"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), PartNumber: aws.Int32(2)}); code(err) != "InvalidPartNumber" {
		t.Fatalf("get part 2 of a rewritten object: %v", err)
	}
}
