package cli

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// requireFUSE skips a test that needs a real mount where there can be
// none.
func requireFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("skipped: a real FUSE mount needs /dev/fuse (%v)", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: a real FUSE mount needs root (the mount calls mount(2) itself)")
	}
}

// isMounted reports whether dir is a mount point, from
// /proc/self/mountinfo.
func isMounted(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// pollUntil polls cond every 20 ms for up to limit.
func pollUntil(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// mountDir makes a mount point and makes sure nothing stays mounted on it
// after the test.
func mountDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if isMounted(t, dir) {
			t.Errorf("%s still mounted at the end of the test; detaching", dir)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// mainChild returns this test binary set up to run canopy with args.
func mainChild(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, "\x1f"))
	return cmd
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestMountForeground runs `canopy mount` in the foreground as a child
// process: the ready line, file operations through the mount, metrics per
// FUSE operation, and on SIGTERM with a directory held open, a lazy
// unmount that ends the process with status 0 once it is closed.
func TestMountForeground(t *testing.T) {
	requireFUSE(t)
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	mnt := mountDir(t)
	metrics := freePort(t)
	cmd := mainChild("--addr", addr, "mount", "--metrics-listen", metrics, "--attr-timeout", "0s", mnt)
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
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if want := "canopy: mounted " + addr + " at " + mnt + "\n"; line != want || err != nil {
		t.Fatalf("ready line %q (%v), want %q", line, err, want)
	}
	if err := os.MkdirAll(filepath.Join(mnt, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "nx")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat of a missing name: %v", err)
	}
	out := mustCanopy(t, addr, "ls", "/a")
	if !strings.Contains(out, "b") {
		t.Errorf("the server does not list what was made through the mount: %q", out)
	}
	got := scrape(t, metrics,
		`canopy_fuse_operations_total\{op="mkdir",result="ok"\}`,
		`canopy_fuse_operations_total\{op="lookup",result="ENOENT"\}`,
		`canopy_fuse_operation_seconds_count\{op="mkdir"\}`)
	if got[0] < 2 || got[1] < 1 || got[2] < 2 {
		t.Errorf("metrics: mkdir ok %v, lookup ENOENT %v, mkdir timings %v", got[0], got[1], got[2])
	}

	held, err := os.Open(filepath.Join(mnt, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if !pollUntil(10*time.Second, func() bool { return !isMounted(t, mnt) }) {
		held.Close()
		t.Fatal("still mounted 10 s after SIGTERM")
	}
	select {
	case err := <-exited:
		held.Close()
		exited <- err
		t.Fatalf("exited (%v) while a directory on the detached mount was open", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := held.Readdirnames(-1); err != nil {
		t.Errorf("reading the held directory after the detach: %v", err)
	}
	held.Close()
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("mount exited with %v, want status 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("mount still running 10 s after its last open directory was closed")
	}
}

// TestMountBackgroundUmount runs `canopy mount -d`, which must print the
// ready line and return while the mount keeps serving, then `canopy
// umount`, which must end it.
func TestMountBackgroundUmount(t *testing.T) {
	requireFUSE(t)
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	mnt := mountDir(t)
	saved := reexec
	reexec = func(args []string) (*exec.Cmd, error) { return mainChild(args...), nil }
	defer func() { reexec = saved }()

	out := mustCanopy(t, addr, "mount", "-d", "--entry-timeout", "0s", mnt)
	if !strings.HasPrefix(out, "canopy: mounted "+addr+" at "+mnt+"\n") {
		t.Fatalf("output %q, want the ready line first", out)
	}
	m := regexp.MustCompile(`as pid (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no pid in %q", out)
	}
	pid, _ := strconv.Atoi(m[1])
	alive := func() bool { return syscall.Kill(pid, 0) == nil }
	defer func() {
		if alive() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	if !isMounted(t, mnt) || !alive() {
		t.Fatalf("after mount -d: mounted %v, process alive %v", isMounted(t, mnt), alive())
	}
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("written through the mount\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustCanopy(t, addr, "cat", "/f"); out != "written through the mount\n" {
		t.Errorf("canopy cat /f: %q", out)
	}
	// canopy status lists the mount: its host, process and mount point.
	waitFor(t, "the mount in canopy status --json", func() bool {
		for _, cl := range statusOf(t, addr).Clients {
			if cl.Mount == mnt && cl.PID == uint32(pid) && cl.Host != "" && cl.Version != "" && cl.Since != "" {
				return true
			}
		}
		return false
	})
	mustCanopy(t, addr, "umount", mnt)
	if isMounted(t, mnt) {
		t.Error("still mounted after canopy umount")
	}
	if !pollUntil(10*time.Second, func() bool { return !alive() }) {
		t.Error("background mount still running 10 s after canopy umount")
	}
	if _, err := canopy(t, addr, "umount", mnt); err == nil || !strings.Contains(err.Error(), "not mounted") {
		t.Errorf("umount of a directory that is not mounted: %v", err)
	}

	// Busy: umount detaches lazily, the mount serves the open directory
	// until it is closed, then ends.
	out = mustCanopy(t, addr, "mount", "-d", mnt)
	m = regexp.MustCompile(`as pid (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no pid in %q", out)
	}
	pid, _ = strconv.Atoi(m[1])
	held, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := canopy(t, addr, "umount", "--no-lazy", mnt); err == nil || !isMounted(t, mnt) {
		held.Close()
		t.Fatalf("umount --no-lazy of a busy mount: %v, mounted %v", err, isMounted(t, mnt))
	}
	out = mustCanopy(t, addr, "umount", mnt)
	if !strings.Contains(out, "busy; detached") || isMounted(t, mnt) {
		t.Errorf("umount of a busy mount printed %q; mounted %v", out, isMounted(t, mnt))
	}
	names, err := held.Readdirnames(-1)
	if err != nil || len(names) != 1 || names[0] != "f" {
		t.Errorf("listing the held directory after the detach: %v %v", names, err)
	}
	if !alive() {
		t.Error("the mount ended while a directory on it was open")
	}
	held.Close()
	if !pollUntil(10*time.Second, func() bool { return !alive() }) {
		t.Error("background mount still running 10 s after its last open directory was closed")
	}
}

// TestMountReadOnly mounts read-only: reads work, every change is EROFS.
func TestMountReadOnly(t *testing.T) {
	requireFUSE(t)
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	mustCanopy(t, addr, "mkdir", "/d")
	mnt := mountDir(t)
	cmd := mainChild("--addr", addr, "mount", "--read-only", mnt)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); !strings.HasPrefix(line, "canopy: mounted ") {
		t.Fatalf("ready line %q (%v)", line, err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "d")); err != nil {
		t.Errorf("stat on a read-only mount: %v", err)
	}
	for what, err := range map[string]error{
		"mkdir":  os.Mkdir(filepath.Join(mnt, "x"), 0o755),
		"create": os.WriteFile(filepath.Join(mnt, "f"), nil, 0o644),
		"chmod":  os.Chmod(filepath.Join(mnt, "d"), 0o700),
		"rmdir":  os.Remove(filepath.Join(mnt, "d")),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s on a read-only mount: %v, want EROFS", what, err)
		}
	}
}
