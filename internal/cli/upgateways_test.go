package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
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
	cmd := mainChild("up", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--s3", "127.0.0.1:0", "--webdav", "127.0.0.1:0")
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
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("upbucket")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("upbucket"), Key: aws.String("k"), Body: strings.NewReader("through s3")}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addrs[2] + "/upbucket/k")
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
	if b, err := c.ReadFile(ctx, "/upbucket/k"); err != nil || string(b) != "through s3" {
		t.Fatalf("SDK read %q, %v", b, err)
	}
}
