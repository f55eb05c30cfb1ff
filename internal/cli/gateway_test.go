package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// startGateway runs `canopy gateway KIND ARGS...` as a child process
// against the server at addr and returns the address of its ready line.
func startGateway(t *testing.T, addr, kind string, args ...string) string {
	t.Helper()
	cmd := mainChild(append([]string{"--addr", addr, "gateway", kind, "--listen", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	prefix := "canopy: " + kind + " gateway ready at "
	gw, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
	if err != nil || !ok {
		t.Fatalf("ready line %q (%v), want %q ADDR", line, err, prefix)
	}
	return gw
}

// TestGatewayWebDAV starts `canopy gateway webdav` with a user and
// metrics, writes a file through it and reads it with the SDK.
func TestGatewayWebDAV(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	metrics := freePort(t)
	gw := startGateway(t, addr, "webdav", "--user", "alice:pw", "--metrics-listen", metrics)

	put := func(user, pass string) int {
		req, _ := http.NewRequest(http.MethodPut, "http://"+gw+"/hello.txt", strings.NewReader("over webdav"))
		req.SetBasicAuth(user, pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := put("alice", "nope"); got != http.StatusUnauthorized {
		t.Fatalf("PUT with a wrong password: %d", got)
	}
	if got := put("alice", "pw"); got != http.StatusCreated {
		t.Fatalf("PUT: %d", got)
	}
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b, err := c.ReadFile(context.Background(), "/hello.txt"); err != nil || string(b) != "over webdav" {
		t.Fatalf("SDK read %q, %v", b, err)
	}
	got := scrape(t, metrics,
		`canopy_gateway_requests_total\{gateway="webdav",op="PUT",status="201"\}`,
		`canopy_gateway_requests_total\{gateway="webdav",op="PUT",status="401"\}`,
		`canopy_gateway_bytes_total\{direction="in",gateway="webdav"\}`)
	if got[0] != 1 || got[1] != 1 || got[2] != float64(len("over webdav")) {
		t.Fatalf("metrics: PUT 201 %v, PUT 401 %v, bytes in %v", got[0], got[1], got[2])
	}
}

// TestGatewayS3 starts `canopy gateway s3` with two keys, one acting as
// another uid, and metrics: what the first key writes the SDK reads, the
// second is refused by the namespace's permissions, and the requests are
// counted.
func TestGatewayS3(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	keys := filepath.Join(t.TempDir(), "keys")
	other := os.Getuid() + 1
	text := fmt.Sprintf("# gateway keys\nAKOWNER ownersecret\nAKOTHER othersecret %d:%d\n", other, other)
	if err := os.WriteFile(keys, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	metrics := freePort(t)
	gw := startGateway(t, addr, "s3", "--access-keys", keys, "--metrics-listen", metrics)
	ctx := context.Background()
	s3c := func(key, secret string) *s3.Client {
		return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + gw), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(key, secret, "")})
	}
	owner, otherKey := s3c("AKOWNER", "ownersecret"), s3c("AKOTHER", "othersecret")
	if _, err := owner.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("data")}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
		t.Fatal(err)
	}
	_, err := otherKey.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("k2"), Body: strings.NewReader("v")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" {
		t.Fatalf("put as another uid into a directory it may not write: %v", err)
	}
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b, err := c.ReadFile(ctx, "/data/k"); err != nil || string(b) != "v" {
		t.Fatalf("SDK read %q, %v", b, err)
	}
	got := scrape(t, metrics,
		`canopy_gateway_requests_total\{gateway="s3",op="PutObject",status="200"\}`,
		`canopy_gateway_requests_total\{gateway="s3",op="PutObject",status="403"\}`)
	if got[0] != 1 || got[1] != 1 {
		t.Fatalf("metrics: PutObject 200 %v, 403 %v", got[0], got[1])
	}
}
