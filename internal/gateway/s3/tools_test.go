package s3_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// treeSums returns the SHA-256 of every file below dir, by relative path.
func treeSums(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sums[filepath.ToSlash(rel)] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// TestAWSCLISync syncs a tree of 1,000 files up through the gateway with
// the AWS command line and down again, and compares checksums, when the
// aws command is installed.
func TestAWSCLISync(t *testing.T) {
	bin, err := exec.LookPath("aws")
	if err != nil {
		t.Skip("the aws command is not installed (apt-get install awscli)")
	}
	if testing.Short() {
		t.Skip("syncs 1,000 files")
	}
	e := start(t)
	e.mkbucket(t, "sync")
	up, down, home := t.TempDir(), t.TempDir(), t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 1000 {
		p := filepath.Join(up, fmt.Sprintf("d%d/e%d/f%04d.bin", i%10, i%7, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, rng.IntN(64<<10))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	aws := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(e.ctx, bin, append([]string{"--endpoint-url", e.url, "--only-show-errors"}, args...)...)
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+access, "AWS_SECRET_ACCESS_KEY="+secret,
			"AWS_DEFAULT_REGION=us-east-1", "HOME="+home, "AWS_CONFIG_FILE="+filepath.Join(home, "none"),
			"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("aws %v: %v\n%s", args, err, out.String())
		}
	}
	aws("s3", "sync", up, "s3://sync/tree")
	aws("s3", "sync", "s3://sync/tree", down)
	want, got := treeSums(t, up), treeSums(t, down)
	if len(got) != 1000 {
		t.Fatalf("synced down %d files, want 1000", len(got))
	}
	for p, sum := range want {
		if got[p] != sum {
			t.Fatalf("%s differs after the round trip", p)
		}
	}
	// The files are in the namespace, under the bucket.
	b, err := e.c.ReadFile(e.ctx, "/sync/tree/d3/e3/f0003.bin")
	if err != nil || sha256.Sum256(b) != want["d3/e3/f0003.bin"] {
		t.Fatalf("SDK read of a synced file: %v", err)
	}
	// A second sync up finds nothing to send: sizes and times agree.
	aws("s3", "sync", up, "s3://sync/tree")
}
