package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/canopyfs/canopy/client"
)

// TestUpGateways runs `canopy up --s3 --webdav` as a child process: the
// server's ready line and then the gateways', an object put over S3 read
// over WebDAV and through the SDK.
func TestUpGateways(t *testing.T) {
	testUpGateways(t, "upbucket", 0)
}

// TestUpGatewaysPartitions is TestUpGateways with --partitions 2: the
// gateways are clients of the router, and an object put in a bucket that
// is partition 1's mount lives in partition 1.
func TestUpGatewaysPartitions(t *testing.T) {
	testUpGateways(t, "bucket-p1", 1, "--partitions", "2", "--s3-anonymous")
}

// testUpGateways runs the test with canopy up's extra args. The bucket is
// made, or for part > 0 mounted as that partition's root, where the object
// must then land.
func testUpGateways(t *testing.T, bucket string, part uint16, args ...string) {
	cmd := mainChild(append([]string{"up", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--s3", "127.0.0.1:0", "--webdav", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cmd.Env, "CANOPY_S3_ACCESS_KEY=AKUP", "CANOPY_S3_SECRET_KEY=upsecret")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r := bufio.NewReader(stdout)
	var addrs []string
	for _, prefix := range []string{"canopy: ready at ", "canopy: s3 gateway ready at ", "canopy: webdav gateway ready at "} {
		line, err := r.ReadString('\n')
		a, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
		if err != nil || !ok {
			t.Fatalf("ready line %q (%v), want %q ADDR", line, err, prefix)
		}
		addrs = append(addrs, a)
	}
	ctx := context.Background()
	s3c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + addrs[1]), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AKUP", "upsecret", "")})
	if part == 0 {
		if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatal(err)
		}
	} else if out, err := mainChild("--addr", addrs[0], "mounttable", "add", "/"+bucket, fmt.Sprint(part)).CombinedOutput(); err != nil {
		t.Fatalf("mounttable add: %v: %s", err, out)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("through s3")}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addrs[2] + "/" + bucket + "/k")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "through s3" {
		t.Fatalf("webdav GET: %d %q", resp.StatusCode, b)
	}
	c, err := client.Dial(addrs[0], client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b, err := c.ReadFile(ctx, "/"+bucket+"/k"); err != nil || string(b) != "through s3" {
		t.Fatalf("SDK read %q, %v", b, err)
	}
	// Without credentials: refused, unless --s3-anonymous (the object is
	// 0644, so nobody may read it).
	anon, err := http.Get("http://" + addrs[1] + "/" + bucket + "/k")
	if err != nil {
		t.Fatal(err)
	}
	anon.Body.Close()
	want := http.StatusForbidden
	if slices.Contains(args, "--s3-anonymous") {
		want = http.StatusOK
	}
	if anon.StatusCode != want {
		t.Fatalf("GET without credentials: %d, want %d", anon.StatusCode, want)
	}
	fi, err := c.Stat(ctx, "/"+bucket+"/k")
	if err != nil {
		t.Fatal(err)
	}
	if got := uint16(fi.Ino() >> 48); got != part {
		t.Fatalf("the object's inode %#x is partition %d's, want %d's", fi.Ino(), got, part)
	}
}
