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
	"strings"
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

// syncTool is an S3 command line program driven by the round-trip test.
type syncTool struct {
	name, pkg string
	// env is the tool's environment: credentials, endpoint, a config of its own.
	env func(e *env, home string) []string
	// args are the program's arguments before the command.
	args func(e *env, home string) []string
	// up and down are the arguments that sync a local directory to
	// bucket "sync", prefix "tree", and back.
	up, down func(local string) []string
}

var syncTools = []syncTool{{
	name: "aws", pkg: "awscli",
	env: func(e *env, home string) []string {
		return []string{"AWS_ACCESS_KEY_ID=" + access, "AWS_SECRET_ACCESS_KEY=" + secret,
			"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=" + filepath.Join(home, "none"),
			"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none")}
	},
	args: func(e *env, home string) []string { return []string{"--endpoint-url", e.url, "--only-show-errors"} },
	up:   func(local string) []string { return []string{"s3", "sync", local, "s3://sync/tree"} },
	down: func(local string) []string { return []string{"s3", "sync", "s3://sync/tree", local} },
}, {
	name: "s3cmd", pkg: "s3cmd",
	env: func(e *env, home string) []string { return nil },
	args: func(e *env, home string) []string {
		host := strings.TrimPrefix(e.url, "http://")
		cfg := filepath.Join(home, "s3cfg")
		if err := os.WriteFile(cfg, []byte("[default]\n"), 0o600); err != nil {
			panic(err)
		}
		return []string{"-c", cfg, "--access_key=" + access, "--secret_key=" + secret, "--host=" + host,
			"--host-bucket=" + host, "--no-ssl", "--region=us-east-1", "--no-progress", "--quiet"}
	},
	up:   func(local string) []string { return []string{"sync", local + "/", "s3://sync/tree/"} },
	down: func(local string) []string { return []string{"sync", "s3://sync/tree/", local + "/"} },
}, {
	name: "rclone", pkg: "rclone",
	env: func(e *env, home string) []string {
		return []string{"RCLONE_CONFIG_GW_TYPE=s3", "RCLONE_CONFIG_GW_PROVIDER=Other",
			"RCLONE_CONFIG_GW_ACCESS_KEY_ID=" + access, "RCLONE_CONFIG_GW_SECRET_ACCESS_KEY=" + secret,
			"RCLONE_CONFIG_GW_ENDPOINT=" + e.url, "RCLONE_CONFIG_GW_REGION=us-east-1",
			"RCLONE_CONFIG_GW_FORCE_PATH_STYLE=true"}
	},
	args: func(e *env, home string) []string {
		return []string{"--config", filepath.Join(home, "rclone.conf"), "--quiet"}
	},
	up:   func(local string) []string { return []string{"sync", local, "gw:sync/tree"} },
	down: func(local string) []string { return []string{"sync", "gw:sync/tree", local} },
}}

// TestSyncTools syncs a tree of 1,000 files up through the gateway and down
// again with each S3 command line program that is installed (awscli,
// s3cmd, rclone), and compares checksums.
func TestSyncTools(t *testing.T) {
	for _, tool := range syncTools {
		t.Run(tool.name, func(t *testing.T) {
			bin, err := exec.LookPath(tool.name)
			if err != nil {
				t.Skipf("the %s command is not installed (apt-get install %s)", tool.name, tool.pkg)
			}
			if testing.Short() {
				t.Skip("syncs 1,000 files")
			}
			syncRoundTrip(t, bin, tool)
		})
	}
}

func syncRoundTrip(t *testing.T, bin string, tool syncTool) {
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
	// The tool sees only its own settings: an AWS_* or RCLONE_* variable of
	// the caller's (a CA bundle, a profile) would change what it does.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "RCLONE_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home)
	env = append(env, tool.env(e, home)...)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(e.ctx, bin, append(tool.args(e, home), args...)...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v\n%s", tool.name, args, err, out.String())
		}
	}
	run(tool.up(up)...)
	run(tool.down(down)...)
	want, got := treeSums(t, up), treeSums(t, down)
	if len(got) != len(want) {
		t.Fatalf("synced down %d files, want %d", len(got), len(want))
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
	// A second sync up finds nothing to send and changes nothing.
	before, err := e.c.Stat(e.ctx, "/sync/tree/d3/e3/f0003.bin")
	if err != nil {
		t.Fatal(err)
	}
	run(tool.up(up)...)
	after, err := e.c.Stat(e.ctx, "/sync/tree/d3/e3/f0003.bin")
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("a second sync rewrote an unchanged file: mtime %v then %v", before.ModTime(), after.ModTime())
	}
}
