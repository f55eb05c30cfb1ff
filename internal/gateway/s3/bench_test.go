package s3_test

import (
	"bytes"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// BenchmarkObjects puts and gets objects through the gateway and the same
// bytes through the SDK directly, one large object at a time and small
// ones from 16 goroutines; the ratio of the two is the gateway's cost.
//
// "gateway" signs each payload (the client computes its SHA-256 and the
// gateway checks it), as the AWS SDK does over plain HTTP; "unsigned"
// sends UNSIGNED-PAYLOAD, as clients over TLS may.
func BenchmarkObjects(b *testing.B) {
	benchObjects(b, []int{4 << 10, 128 << 10, 64 << 20})
}

// BenchmarkLargeObjects is BenchmarkObjects with objects of 1 GiB (run it
// with -benchtime 1x or 2x).
func BenchmarkLargeObjects(b *testing.B) {
	benchObjects(b, []int{1 << 30})
}

func benchObjects(b *testing.B, sizes []int) {
	for _, size := range sizes {
		for _, via := range []string{"gateway", "unsigned", "sdk"} {
			b.Run(fmt.Sprintf("%s/%dKiB", via, size>>10), func(b *testing.B) {
				e := startB(b)
				data := bytes.Repeat([]byte("canopy!!"), size/8)
				var put, get func(string) error
				switch via {
				case "gateway":
					put, get = e.gatewayOps(e.s3, data)
				case "unsigned":
					put, get = e.gatewayOps(s3.New(e.s3.Options(), s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)), data)
				default:
					put, get = e.sdkOps(data)
				}
				keys := 8
				if size >= 1<<30 {
					keys = 1 // one object of 1 GiB rewritten
				}
				parallel := size < 1<<20
				var n atomic.Int64
				run := func(b *testing.B, op func(key string) error) {
					if !parallel {
						for i := 0; i < b.N; i++ {
							if err := op(fmt.Sprintf("o%d", i%keys)); err != nil {
								b.Fatal(err)
							}
						}
						return
					}
					b.SetParallelism(8)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := op(fmt.Sprintf("o%d", n.Add(1)%256)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.Run("put", func(b *testing.B) { b.SetBytes(int64(size)); run(b, put) })
				for i := range 256 {
					if err := put(fmt.Sprintf("o%d", i)); err != nil {
						b.Fatal(err)
					}
					if !parallel && i == keys-1 {
						break
					}
				}
				b.Run("get", func(b *testing.B) { b.SetBytes(int64(size)); run(b, get) })
			})
		}
	}
}

func (e *env) gatewayOps(c *s3.Client, data []byte) (put, get func(string) error) {
	put = func(key string) error {
		_, err := c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: &key, Body: bytes.NewReader(data)})
		return err
	}
	get = func(key string) error {
		out, err := c.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: &key})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		_, err = io.Copy(io.Discard, out.Body)
		return err
	}
	return put, get
}

func (e *env) sdkOps(data []byte) (put, get func(string) error) {
	put = func(key string) error { return e.c.WriteFile(e.ctx, "/bench/"+key, data, 0o644) }
	get = func(key string) error {
		f, err := e.c.Open(e.ctx, "/bench/"+key)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(io.Discard, f)
		return err
	}
	return put, get
}

// startB starts an environment with a bucket "bench".
func startB(b *testing.B) *env {
	b.Helper()
	e := start(b)
	if _, err := e.c.Mkdir(e.ctx, "/bench", 0o755); err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkList lists a directory of 10,000 keys through the gateway, in
// pages of 1,000; the figure to read is keys/s.
func BenchmarkList(b *testing.B) {
	e := startB(b)
	const keys = 10000
	for i := range keys {
		if err := e.c.WriteFile(e.ctx, fmt.Sprintf("/bench/k%05d", i), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		p := s3.NewListObjectsV2Paginator(e.s3, &s3.ListObjectsV2Input{Bucket: aws.String("bench")})
		for p.HasMorePages() {
			out, err := p.NextPage(e.ctx)
			if err != nil {
				b.Fatal(err)
			}
			n += len(out.Contents)
		}
		if n != keys {
			b.Fatalf("listed %d keys of %d", n, keys)
		}
	}
	b.ReportMetric(float64(keys*b.N)/b.Elapsed().Seconds(), "keys/s")
}
