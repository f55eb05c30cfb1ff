package cli

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chunkFiles counts the data objects under an up directory's store.
func chunkFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(filepath.Join(dir, "objects", "chunks"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// `canopy up` keeps file data under DIR/objects by default and runs the
// collector: a removed file goes to the trash, and once purged from it its
// objects go after --gc-delay.
func TestUpStoresDataAndCollects(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	args := []string{"up", "--dir", dir, "--listen", "127.0.0.1:0", "--gc-delay", "1ms", "--gc-interval", "50ms"}
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, "\x1f"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "canopy: ready at ")
	if err != nil || !ok {
		t.Fatalf("ready line %q (%v)", line, err)
	}
	src := filepath.Join(t.TempDir(), "f")
	sum := writeRandomFile(t, src, 9<<20, 4)
	mustCanopy(t, addr, "put", src, "/f")
	if n := chunkFiles(t, dir); n != 3 {
		t.Fatalf("%d objects under %s/objects after putting 9 MiB, want 3", n, dir)
	}
	back := filepath.Join(t.TempDir(), "f")
	mustCanopy(t, addr, "get", "/f", back)
	if sha256File(t, back) != sum {
		t.Fatal("file differs after put and get")
	}
	mustCanopy(t, addr, "rm", "/f")
	// The trash (on by default) keeps the file until it is purged.
	if ls := mustCanopy(t, addr, "trash", "ls"); !strings.Contains(ls, "/f") || !strings.Contains(ls, "9MiB") {
		t.Fatalf("trash ls after rm:\n%s", ls)
	}
	mustCanopy(t, addr, "trash", "purge", "--all")
	deadline := time.Now().Add(30 * time.Second)
	for chunkFiles(t, dir) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("objects of a removed file still there after 30 s: %d", chunkFiles(t, dir))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := mustCanopy(t, addr, "fsck"); !strings.Contains(got, "clean") {
		t.Fatalf("fsck: %s", got)
	}
}
