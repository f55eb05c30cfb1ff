package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/internal/bench"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

var putGetSize = flag.String("putget-size", "64MiB", "size of the file TestPutGetBigFile copies in and out (e.g. 1GiB)")

// serveWithStorage runs a metadata server whose files keep their data in
// a local directory, and returns its address.
func serveWithStorage(t *testing.T) string {
	t.Helper()
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	return addr
}

// writeRandomFile writes size pseudo-random bytes to path and returns
// their sha256.
func writeRandomFile(t *testing.T, path string, size int64, seed uint64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	rng := rand.New(rand.NewPCG(seed, 3))
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		for i := 0; i < int(n); i += 8 {
			v := rng.Uint64()
			for k := 0; k < 8 && i+k < int(n); k++ {
				buf[i+k] = byte(v >> (8 * k))
			}
		}
		f.Write(buf[:n])
		h.Write(buf[:n])
		left -= n
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestPutGetBigFile copies a file into Canopy with `canopy put` and back
// with `canopy get`, and compares their sha256. -putget-size 1GiB runs the
// full-size version.
func TestPutGetBigFile(t *testing.T) {
	size, err := bench.ParseSize(*putGetSize)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveWithStorage(t)
	dir := t.TempDir()
	src, back := filepath.Join(dir, "src.bin"), filepath.Join(dir, "back.bin")
	want := writeRandomFile(t, src, size, 1)
	mustCanopy(t, addr, "put", src, "/big.bin")
	out := mustCanopy(t, addr, "stat", "--json", "/big.bin")
	if m := lastJSON(t, out); m["size"] != float64(size) {
		t.Fatalf("stat after put: %s", out)
	}
	mustCanopy(t, addr, "get", "/big.bin", back)
	if got := sha256File(t, back); got != want {
		t.Fatalf("sha256 after put and get: %s, want %s", got, want)
	}
	t.Logf("%s: sha256 %s in and out", bench.FormatSize(size), want)
}

func TestTransferTrees(t *testing.T) {
	addr := serveWithStorage(t)
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	sums := map[string]string{}
	for i, rel := range []string{"a", "sub/b", "sub/deep/c", "empty"} {
		p := filepath.Join(tree, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		size := int64(i) * 700_000
		if rel == "empty" {
			size = 0
		}
		sums[rel] = writeRandomFile(t, p, size, uint64(i))
	}
	os.MkdirAll(filepath.Join(tree, "emptydir"), 0o755)

	mustCanopy(t, addr, "mkdir", "/in")
	mustCanopy(t, addr, "put", "-p", "3", tree, "/in") // into the directory: /in/tree
	mustCanopy(t, addr, "cp", "/in/tree", "/copy")     // a new name
	if _, err := canopy(t, addr, "cp", "/copy", "/copy/x"); err == nil {
		t.Fatal("cp of a tree into itself succeeded")
	}
	out := filepath.Join(dir, "out")
	mustCanopy(t, addr, "get", "/copy", out)
	for rel, sum := range sums {
		if got := sha256File(t, filepath.Join(out, rel)); got != sum {
			t.Errorf("%s: sha256 %s after put, cp and get, want %s", rel, got, sum)
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "emptydir")); err != nil || !fi.IsDir() {
		t.Errorf("empty directory not copied: %v", err)
	}

	os.WriteFile(filepath.Join(dir, "hello"), []byte("hello, canopy\n"), 0o644)
	mustCanopy(t, addr, "put", filepath.Join(dir, "hello"), "/hello")
	if got := mustCanopy(t, addr, "cat", "/hello", "/hello"); got != "hello, canopy\nhello, canopy\n" {
		t.Fatalf("cat: %q", got)
	}
	if _, err := canopy(t, addr, "cat", "/nope"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("cat of a missing file: %v", err)
	}
	if got := mustCanopy(t, addr, "fsck"); !strings.Contains(got, "clean") {
		t.Fatalf("fsck: %s", got)
	}
}

func TestBenchIO(t *testing.T) {
	addr := serveWithStorage(t)
	out := mustCanopy(t, addr, "bench", "io", "--files", "8", "--size", "256KiB", "--workers", "2", "--json")
	m := lastJSON(t, out)
	for _, key := range []string{"write_mib_per_sec", "read_mib_per_sec", "files_per_sec", "fixed_cost_share", "fixed_cost_seconds", "ceiling_mib_per_sec", "harness_share", "warnings"} {
		if _, ok := m[key]; !ok {
			t.Errorf("no %q in %s", key, out)
		}
	}
	if m["files"] != float64(8) || m["size_bytes"] != float64(256<<10) || m["write_mib_per_sec"].(float64) <= 0 || m["read_mib_per_sec"].(float64) <= 0 {
		t.Fatalf("result: %s", out)
	}
	if share := m["fixed_cost_share"].(float64); share < 0 || share > 1 {
		t.Fatalf("fixed_cost_share %v", share)
	}
	if _, err := canopy(t, addr, "bench", "io", "--size", "4XiB"); err == nil {
		t.Fatal("bad size accepted")
	}
	// The benchmark removes what it made.
	if got := mustCanopy(t, addr, "ls", "/"); strings.Contains(got, "bench-io") {
		t.Fatalf("left behind: %s", got)
	}
}
