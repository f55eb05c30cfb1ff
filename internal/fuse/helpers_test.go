package fuse

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// requireFUSE skips a test that needs a real mount where there can be
// none: no /dev/fuse, or not root (the mount calls mount(2) itself).
func requireFUSE(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("skipped: a real FUSE mount needs /dev/fuse (%v)", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: a real FUSE mount needs root (the mount calls mount(2) itself)")
	}
}

// fixture is a real metadata server on 127.0.0.1 and the mount of its
// namespace.
type fixture struct {
	mnt  string         // the mount point
	c    *client.Client // a client of the same server, acting as root
	m    *Mount
	addr string
}

// mountTest starts a metadata server and mounts it in a fresh temporary
// directory, its client dialed as `canopy mount` dials it by default (in
// DurabilityPOSIX); the mount is unmounted when the test ends, failed or
// not.
func mountTest(t testing.TB, opts Options) *fixture {
	t.Helper()
	return mountTestClient(t, opts, client.Options{Cred: &client.Cred{}, Durability: client.DurabilityPOSIX})
}

// mountTestClient is mountTest with the mount's client dialled with copts.
func mountTestClient(t testing.TB, opts Options, copts client.Options) *fixture {
	t.Helper()
	requireFUSE(t)
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	c, err := client.Dial(addr, copts)
	if err != nil {
		t.Fatal(err)
	}
	return mountClient(t, c, addr, opts)
}

// mountClient mounts c's namespace (served at addr) in a fresh temporary
// directory; the mount is unmounted and c closed when the test ends.
func mountClient(t testing.TB, c *client.Client, addr string, opts Options) *fixture {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		c.Close()
		t.Fatal(err)
	}
	m, err := MountAt(c, mnt, opts)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unmountBounded(t, m)
		c.Close()
	})
	return &fixture{mnt: mnt, c: c, m: m, addr: addr}
}

// benchMount is mountTest with default options, changed by edits.
func benchMount(b *testing.B, edits ...func(*Options)) *fixture {
	var o Options
	o.AttrTimeout, o.EntryTimeout = DefaultAttrTimeout, DefaultEntryTimeout
	for _, e := range edits {
		e(&o)
	}
	return mountTest(b, o)
}

// unmountBounded unmounts, detaching lazily if that takes more than a
// few seconds (a test that failed with a file still open).
func unmountBounded(t testing.TB, m *Mount) {
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("unmount: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("unmount %s took over 10 s; detaching", m.Dir())
		syscall.Unmount(m.Dir(), syscall.MNT_DETACH)
	}
}

// path joins names below the mount point.
func (f *fixture) path(names ...string) string {
	return filepath.Join(append([]string{f.mnt}, names...)...)
}

// run runs a command with a time limit and returns its combined output,
// failing the test if it fails.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(dir, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(dir string, name string, args ...string) (string, error) {
	// The child must not chdir into the mount itself: between fork and
	// exec it still shares this process's memory, and a FUSE request it
	// makes then can wait forever for this process's runtime, which may
	// need to start a thread to serve it and cannot while the fork is in
	// progress. A shell, already exec'd, changes directory instead.
	cmd := exec.Command(name, args...)
	if dir != "" {
		cmd = exec.Command("/bin/sh", append([]string{"-c", `cd "$1" && shift && exec "$@"`, "sh", dir, name}, args...)...)
	}
	cmd.WaitDelay = time.Second
	done := make(chan struct{})
	defer close(done)
	timer := time.AfterFunc(60*time.Second, func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	})
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// asCaller runs fn as uid, gid and supplementary groups, on an OS thread
// of its own, on f's mount, and returns what fn returns. The credentials are set with
// raw system calls, which change only the calling thread (syscall.Setuid
// would change every thread of the process, the mount's included); the
// thread stays locked to fn's goroutine and ends with it, so nothing else
// ever runs with them. The kernel gives the mount that thread's ids (and
// the mount reads its groups from /proc), as for another process, and
// with euid other than 0 the thread has no capabilities (no CAP_FSETID).
func (f *fixture) asCaller(uid, gid uint32, groups []uint32, fn func() error) error {
	res := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		var gp unsafe.Pointer
		if len(groups) > 0 {
			gp = unsafe.Pointer(&groups[0])
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(gp), 0); e != 0 {
			res <- fmt.Errorf("setgroups: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			res <- fmt.Errorf("setresgid: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			res <- fmt.Errorf("setresuid: %w", e)
			return
		}
		// The thread is one the process had: the mount may have its
		// groups of a moment ago cached (for a second, as for a process
		// that calls setgroups).
		g := f.m.FS.groups
		g.mu.Lock()
		delete(g.m, uint32(unix.Gettid()))
		g.mu.Unlock()
		res <- fn()
	}()
	return <-res
}
