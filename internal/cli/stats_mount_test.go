package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// TestStatsMount mounts for real with a metrics endpoint, which the mount
// publishes under $CANOPY_RUN_DIR, and runs `canopy stats --mount MNT`
// while files are made and read through the mount: it finds the endpoint
// from the mount point and its lines show the mount's operations and
// block cache reads. Once the mount has ended, --mount refuses the path.
func TestStatsMount(t *testing.T) {
	requireFUSE(t)
	t.Setenv(runDirEnv, t.TempDir())
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	mnt := mountDir(t)
	cmd := mainChild("--addr", addr, "mount", "--metrics-listen", freePort(t), mnt)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); !strings.HasPrefix(line, "canopy: mounted ") {
		t.Fatalf("ready line %q (%v)", line, err)
	}
	rec, err := findMount(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Mountpoint != mnt || rec.PID != cmd.Process.Pid || rec.Addr != addr {
		t.Errorf("published record %+v", rec)
	}

	data := bytes.Repeat([]byte("canopy "), 100_000)
	if err := os.WriteFile(filepath.Join(mnt, "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("f%d", i)), []byte("x"), 0o644); err != nil {
				done <- err
				return
			}
			// Past the kernel's page cache (O_DIRECT): the mount's block
			// cache answers.
			f, err := os.OpenFile(filepath.Join(mnt, "data"), os.O_RDONLY|syscall.O_DIRECT, 0)
			if err != nil {
				done <- err
				return
			}
			buf := make([]byte, 1<<16)
			f.ReadAt(buf, int64(i%8)<<16)
			f.Close()
		}
		done <- nil
	}()
	out := mustCanopy(t, addr, "stats", "--mount", mnt, "--interval", "300ms", "--count", "3", "--json")
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var ops, hits, misses float64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var s statsLine
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if s.FuseOps <= 0 {
			t.Errorf("a line while files are made through the mount shows no FUSE operations: %+v", s)
		}
		ops, hits, misses = ops+s.FuseOps, hits+s.FuseHits, misses+s.FuseMisses
	}
	if hits+misses <= 0 {
		t.Errorf("no block cache reads in %s", out)
	}
	t.Logf("FUSE operations/s %.0f, cache hits/s %.0f, misses/s %.0f (summed over 3 lines)", ops, hits, misses)

	cmd.Process.Signal(os.Interrupt)
	if err := <-exited; err != nil {
		t.Errorf("mount exited with %v", err)
	}
	exited <- nil
	if _, err := canopy(t, addr, "stats", "--mount", mnt, "--count", "1"); !errors.Is(err, ErrNoMountRecord) {
		t.Errorf("stats --mount after the mount ended: %v", err)
	}
}
