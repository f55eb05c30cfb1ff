package cli

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// startMountChild runs `canopy mount` on mnt as a child process and waits
// for its ready line; the child is killed when the test ends. The channel
// returned is closed when the child has exited.
func startMountChild(t *testing.T, addr, mnt string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := mainChild("--addr", addr, "mount", mnt)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "canopy: mounted "+addr+" at "+mnt+"\n" {
		t.Fatalf("ready line %q (%v)", line, err)
	}
	return cmd, exited
}

// lockAll takes a whole-file fcntl lock on fd without waiting.
func lockAll(fd *os.File, typ int16) error {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 0}
	for {
		err := unix.FcntlFlock(fd.Fd(), unix.F_SETLK, &lk)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// TestMountStoppedOrKilledLosesLocks holds a flock and an fcntl lock
// through one `canopy mount` process and shows that another mount of the
// same server gets them: when the holder is stopped (SIGSTOP: its
// connection stays open but its heartbeats stop) within the server's lock
// timeout, and when a holder is killed (its connection closes) at once.
// `canopy umount` then leaves no mount point behind.
func TestMountStoppedOrKilledLosesLocks(t *testing.T) {
	requireFUSE(t)
	const lockTimeout = 2 * time.Second
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), LockTimeout: lockTimeout})
	mntA, mntB := mountDir(t), mountDir(t)
	procA, exitedA := startMountChild(t, addr, mntA)
	procB, exitedB := startMountChild(t, addr, mntB)
	if err := os.WriteFile(filepath.Join(mntA, "f"), []byte("locked\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fa, err := os.OpenFile(filepath.Join(mntA, "f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.OpenFile(filepath.Join(mntB, "f"), os.O_RDWR, 0)
	if err != nil {
		fa.Close()
		t.Fatal(err)
	}
	defer fb.Close()
	if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := lockAll(fa, unix.F_WRLCK); err != nil {
		t.Fatal(err)
	}
	// Held across more than the lock timeout while A is alive (its
	// heartbeats keep it).
	time.Sleep(lockTimeout + time.Second)
	if err := syscall.Flock(int(fb.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("flock on B while A holds it: %v, want EWOULDBLOCK", err)
	}
	if err := lockAll(fb, unix.F_WRLCK); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("fcntl lock on B while A holds it: %v, want EAGAIN", err)
	}

	// A stops: nothing closes, but it falls silent. fa must not be touched
	// until A is gone (a request to a stopped mount waits).
	if err := procA.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if !pollUntil(15*time.Second, func() bool { return syscall.Flock(int(fb.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil }) {
		t.Fatalf("B did not get the flock of the stopped mount within 15 s (lock timeout %v)", lockTimeout)
	}
	t.Logf("flock of the stopped mount taken by B after %v (lock timeout %v)", time.Since(stopped).Round(time.Millisecond), lockTimeout)
	if err := lockAll(fb, unix.F_WRLCK); err != nil {
		t.Fatalf("fcntl lock on B after A's locks expired: %v", err)
	}

	// Kill A (still stopped) and unmount: no stuck mount point.
	procA.Process.Kill()
	<-exitedA
	fa.Close() // the connection is gone: fails at once
	if out, err := canopy(t, addr, "umount", mntA); err != nil {
		t.Fatalf("canopy umount of the killed mount: %v\n%s", err, out)
	}
	if isMounted(t, mntA) {
		t.Fatal("killed mount still mounted after canopy umount")
	}
	if _, err := os.Stat(filepath.Join(mntA, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount point after umount: %v, want an empty directory", err)
	}

	// B holds both locks; killing it closes its connection, and the
	// server releases them at once (an SDK client takes them).
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	fi, err := c.Stat(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Flock(ctx, fi.Ino(), 1, client.WriteLock, false); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("SDK flock while B holds it: %v, want EAGAIN", err)
	}
	procB.Process.Kill()
	<-exitedB
	killed := time.Now()
	if !pollUntil(15*time.Second, func() bool {
		return c.Flock(ctx, fi.Ino(), 1, client.WriteLock, false) == nil &&
			c.SetLk(ctx, fi.Ino(), 1, client.Lock{Type: client.WriteLock, End: client.LockEOF}) == nil
	}) {
		t.Fatal("the killed mount's locks were not released within 15 s")
	}
	t.Logf("locks of the killed mount taken after %v", time.Since(killed).Round(time.Millisecond))
	fb.Close()
	if out, err := canopy(t, addr, "umount", mntB); err != nil {
		t.Fatalf("canopy umount of the killed mount: %v\n%s", err, out)
	}
	if isMounted(t, mntB) {
		t.Fatal("killed mount still mounted after canopy umount")
	}
}
