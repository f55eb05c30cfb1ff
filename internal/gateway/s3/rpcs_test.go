package s3_test

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopyfs/canopy/internal/server/servertest"
)

// rpcCounter reads the metadata server's calls by method.
type rpcCounter struct{ reg *prometheus.Registry }

// counts returns the calls replied to so far, by method.
func (r rpcCounter) counts(t *testing.T) map[string]float64 {
	t.Helper()
	return servertest.CallsByMethod(t, r.reg)
}

// during returns the calls op makes, by method, and their total.
func (r rpcCounter) during(t *testing.T, op func()) (map[string]float64, float64) {
	t.Helper()
	before := r.counts(t)
	op()
	after := r.counts(t)
	d, total := map[string]float64{}, 0.0
	for m, v := range after {
		if n := v - before[m]; n > 0 {
			d[m] = n
			total += n
		}
	}
	return d, total
}

func describe(d map[string]float64) string {
	var parts []string
	for m, n := range d {
		parts = append(parts, fmt.Sprintf("%s=%v", m, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// TestRPCsPerRequest counts the metadata calls a small object's PUT, GET
// and HEAD cost, and keeps them from growing back.
func TestRPCsPerRequest(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := startWith(t, reg)
	e.mkbucket(t, "bkt")
	rc := rpcCounter{reg}
	data := bytes.Repeat([]byte("x"), 4<<10)
	// The first PUT also looks up the data volume, once per client.
	if _, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("first"),
		Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op   string
		max  float64
		call func() error
	}{
		{"put", 8, func() error {
			_, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"),
				Body: bytes.NewReader(data), ContentType: aws.String("text/plain")})
			return err
		}},
		{"get", 6, func() error {
			out, err := e.s3.GetObject(e.ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			b, err := io.ReadAll(out.Body)
			if err == nil && !bytes.Equal(b, data) {
				err = fmt.Errorf("read back %d bytes, want %d", len(b), len(data))
			}
			return err
		}},
		{"head", 4, func() error {
			_, err := e.s3.HeadObject(e.ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
			return err
		}},
	} {
		var err error
		d, n := rc.during(t, func() { err = tc.call() })
		if err != nil {
			t.Fatalf("%s: %v", tc.op, err)
		}
		if n > tc.max { // once more: a background call may have fallen in the window
			d, n = rc.during(t, func() { err = tc.call() })
			if err != nil {
				t.Fatalf("%s: %v", tc.op, err)
			}
		}
		t.Logf("%s: %v calls: %s", tc.op, n, describe(d))
		if n > tc.max {
			t.Errorf("%s made %v metadata calls, want at most %v", tc.op, n, tc.max)
		}
	}
	// A PUT skips the look at the bucket versitygw asks for (versioning),
	// but the API call still finds a missing bucket.
	if _, err := e.s3.GetBucketVersioning(e.ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("missing")}); code(err) != "NoSuchBucket" {
		t.Fatalf("versioning of a missing bucket: %v", err)
	}
	if _, err := e.s3.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String("missing"), Key: aws.String("k"),
		Body: bytes.NewReader(data)}); code(err) != "NoSuchBucket" {
		t.Fatalf("put into a missing bucket: %v", err)
	}
	// The same through the SDK alone, for comparison.
	for _, tc := range []struct {
		op   string
		call func() error
	}{
		{"sdk write", func() error { return e.c.WriteFile(e.ctx, "/bkt/sdk", data, 0o644) }},
		{"sdk read", func() error { _, err := e.c.ReadFile(e.ctx, "/bkt/sdk"); return err }},
		{"sdk stat", func() error { _, err := e.c.Stat(e.ctx, "/bkt/sdk"); return err }},
	} {
		var err error
		d, n := rc.during(t, func() { err = tc.call() })
		if err != nil {
			t.Fatalf("%s: %v", tc.op, err)
		}
		t.Logf("%s: %v calls: %s", tc.op, n, describe(d))
	}
}
