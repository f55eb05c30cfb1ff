package s3_test

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// TestSignedTrailers puts objects with minio-go in signed aws-chunked
// bodies with a trailing CRC32C (minio-go ends the trailer's line with
// "\n\r\n"), whole and in parts, and reads them back.
func TestSignedTrailers(t *testing.T) {
	e := start(t)
	mc, err := minio.New(strings.TrimPrefix(e.url, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(access, secret, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
		TrailingHeaders: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(e.ctx, "trailers", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		size     int
		checksum minio.ChecksumType
	}{
		{"small", 100 << 10, minio.ChecksumCRC32C},
		{"empty", 0, minio.ChecksumCRC32C},
		{"parts", 11 << 20, minio.ChecksumCRC32C},
		{"full-object", 11 << 20, minio.ChecksumFullObjectCRC32C},
	} {
		data := make([]byte, tc.size)
		rand.NewChaCha8([32]byte{9}).Read(data)
		if _, err := mc.PutObject(e.ctx, "trailers", tc.name, bytes.NewReader(data), int64(len(data)),
			minio.PutObjectOptions{PartSize: 5 << 20, Checksum: tc.checksum}); err != nil {
			t.Fatalf("%s: put: %v", tc.name, err)
		}
		obj, err := mc.GetObject(e.ctx, "trailers", tc.name, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(obj)
		obj.Close()
		if err != nil || md5.Sum(got) != md5.Sum(data) {
			t.Fatalf("%s: read back %d bytes (want %d), %v", tc.name, len(got), len(data), err)
		}
		if tc.name == "small" {
			st, err := mc.StatObject(e.ctx, "trailers", tc.name, minio.StatObjectOptions{Checksum: true})
			h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
			h.Write(data)
			want := base64.StdEncoding.EncodeToString(h.Sum(nil))
			if err != nil || st.ChecksumCRC32C != want {
				t.Fatalf("%s: checksum %q, want %q (%v)", tc.name, st.ChecksumCRC32C, want, err)
			}
		}
	}
}
