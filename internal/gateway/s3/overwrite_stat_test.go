package s3_test

import (
	"bytes"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestOverwriteThenStat overwrites one key with objects of 0, 64 KiB - 1
// and 64 KiB bytes, many times over kept-alive connections, and stats it
// after every write: each stat must see the object just written. An empty
// object sent aws-chunked still has a final chunk on the wire; left unread,
// it was taken for the next request and answered 400.
func TestOverwriteThenStat(t *testing.T) {
	e := start(t)
	mc := newMinio(t, e, access, secret)
	if err := mc.MakeBucket(e.ctx, "over", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	for round := range 100 {
		for _, size := range []int64{0, 64<<10 - 1, 64 << 10} {
			data := bytes.Repeat([]byte{byte(round)}, int(size))
			if _, err := mc.PutObject(e.ctx, "over", "obj", bytes.NewReader(data), size, minio.PutObjectOptions{}); err != nil {
				t.Fatalf("round %d size %d: put: %v", round, size, err)
			}
			st, err := mc.StatObject(e.ctx, "over", "obj", minio.StatObjectOptions{})
			if err != nil || st.Size != size {
				t.Fatalf("round %d size %d: stat: size %d, %v", round, size, st.Size, err)
			}
		}
	}
}
