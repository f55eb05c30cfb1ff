package fuse

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
)

// Locks between two mounts of one server, and fallocate.

func lockCases() []posixCase {
	return []posixCase{
		{"flock_two_mounts", testFlockTwoMounts},
		{"fcntl_locks_two_mounts", testFcntlTwoMounts},
		{"fallocate", testFallocate},
	}
}

// secondMount mounts f's server once more, as another client, until the
// test ends; it returns the path of dir (below f's mount) in it.
func (f *fixture) secondMount(t *testing.T, dir string) string {
	t.Helper()
	c, err := client.Dial(f.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(mountClient(t, c, f.addr, Options{}).mnt, f.rel(dir))
}

// noEINTR retries a call that a signal to this process interrupted (the
// Go runtime signals its own threads to preempt goroutines, and a FUSE
// lock wait ends with EINTR then).
func noEINTR(call func() error) error {
	for {
		if err := call(); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// eventually polls cond for up to 10 s (a close reaches the mount's
// RELEASE asynchronously).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

func testFlockTwoMounts(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, []byte("x"), 0o644))
	other := filepath.Join(f.secondMount(t, dir), "f")
	a, err := os.Open(p)
	must(t, err)
	defer a.Close()
	b, err := os.Open(other)
	must(t, err)
	defer b.Close()

	// Exclusive on A: B can take neither kind.
	must(t, noEINTR(func() error { return syscall.Flock(int(a.Fd()), syscall.LOCK_EX) }))
	wantErrno(t, "LOCK_EX|LOCK_NB on B while A holds LOCK_EX", syscall.Flock(int(b.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
	wantErrno(t, "LOCK_SH|LOCK_NB on B while A holds LOCK_EX", syscall.Flock(int(b.Fd()), syscall.LOCK_SH|syscall.LOCK_NB), syscall.EWOULDBLOCK)
	// A second open file on the same mount is another owner, as on Linux.
	a2, err := os.Open(p)
	must(t, err)
	wantErrno(t, "LOCK_EX|LOCK_NB on a second open file of A", syscall.Flock(int(a2.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
	must(t, a2.Close())

	// Shared on both.
	must(t, syscall.Flock(int(a.Fd()), syscall.LOCK_SH))
	must(t, syscall.Flock(int(b.Fd()), syscall.LOCK_SH|syscall.LOCK_NB))
	wantErrno(t, "LOCK_EX|LOCK_NB on A while B shares", syscall.Flock(int(a.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
	must(t, syscall.Flock(int(b.Fd()), syscall.LOCK_UN))

	// A blocking LOCK_EX on B waits for A's unlock.
	must(t, syscall.Flock(int(a.Fd()), syscall.LOCK_EX))
	got := make(chan error, 1)
	go func() { got <- noEINTR(func() error { return syscall.Flock(int(b.Fd()), syscall.LOCK_EX) }) }()
	select {
	case err := <-got:
		t.Fatalf("blocking LOCK_EX on B returned (%v) while A holds LOCK_EX", err)
	case <-time.After(200 * time.Millisecond):
	}
	must(t, syscall.Flock(int(a.Fd()), syscall.LOCK_UN))
	select {
	case err := <-got:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("blocking LOCK_EX on B still waiting 10 s after A's unlock")
	}

	// A signal ends a wait: flock(1) -w waits with an alarm, which
	// interrupts its flock(2) (exit status 1). The abandoned wait must not
	// be granted afterwards.
	if bin, err := exec.LookPath("flock"); err == nil {
		start := time.Now()
		out, err := runErr("", bin, "-w", "0.3", "-x", p, "true")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("flock -w 0.3 on A while B holds LOCK_EX: %v %q, want exit status 1", err, out)
		}
		t.Logf("interrupted flock wait returned after %v", time.Since(start).Round(time.Millisecond))
		must(t, syscall.Flock(int(b.Fd()), syscall.LOCK_UN))
		a3, err := os.Open(p)
		must(t, err)
		must(t, syscall.Flock(int(a3.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
		must(t, a3.Close())
		eventually(t, "LOCK_EX|LOCK_NB on B after A's third file closed", func() bool {
			return syscall.Flock(int(b.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
		})
	}

	// Closing B's file releases its lock; the flock(1) command on A then
	// gets it without waiting.
	must(t, b.Close())
	if bin, err := exec.LookPath("flock"); err == nil {
		eventually(t, "flock -n on A after B closed", func() bool {
			_, err := runErr("", bin, "-n", "-x", p, "true")
			return err == nil
		})
	} else {
		eventually(t, "LOCK_EX|LOCK_NB on A after B closed", func() bool {
			return syscall.Flock(int(a.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
		})
	}
}

// setlk makes an F_SETLK (or, with wait, F_SETLKW) call on bytes
// [start, start+n) (n 0: to the end of the file).
func setlk(fd *os.File, typ int16, start, n int64, wait bool) error {
	cmd := unix.F_SETLK
	if wait {
		cmd = unix.F_SETLKW
	}
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
	return noEINTR(func() error { return unix.FcntlFlock(fd.Fd(), cmd, &lk) })
}

func getlk(t *testing.T, fd *os.File, typ int16, start, n int64) unix.Flock_t {
	t.Helper()
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
	must(t, noEINTR(func() error { return unix.FcntlFlock(fd.Fd(), unix.F_GETLK, &lk) }))
	return lk
}

func testFcntlTwoMounts(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, make([]byte, 200), 0o644))
	other := filepath.Join(f.secondMount(t, dir), "f")
	a, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	defer a.Close()
	b, err := os.OpenFile(other, os.O_RDWR, 0)
	must(t, err)
	defer b.Close()

	must(t, setlk(a, unix.F_WRLCK, 0, 100, false))
	wantErrno(t, "F_SETLK of bytes A write-locked", setlk(b, unix.F_WRLCK, 50, 11, false), syscall.EAGAIN)
	wantErrno(t, "F_SETLK read of bytes A write-locked", setlk(b, unix.F_RDLCK, 99, 1, false), syscall.EAGAIN)
	lk := getlk(t, b, unix.F_WRLCK, 0, 0)
	if lk.Type != unix.F_WRLCK || lk.Start != 0 || lk.Len != 100 || lk.Pid != int32(os.Getpid()) {
		t.Errorf("F_GETLK on B: type %d start %d len %d pid %d; want A's write lock 0+100 of pid %d",
			lk.Type, lk.Start, lk.Len, lk.Pid, os.Getpid())
	}
	if lk := getlk(t, b, unix.F_WRLCK, 100, 50); lk.Type != unix.F_UNLCK {
		t.Errorf("F_GETLK of free bytes: type %d, want F_UNLCK", lk.Type)
	}
	// The holder sees no conflict with itself.
	if lk := getlk(t, a, unix.F_WRLCK, 0, 0); lk.Type != unix.F_UNLCK {
		t.Errorf("F_GETLK by the holder: type %d, want F_UNLCK", lk.Type)
	}
	must(t, setlk(b, unix.F_RDLCK, 100, 100, false))

	// Unlocking part of A's range lets B lock that part only.
	must(t, setlk(a, unix.F_UNLCK, 0, 50, false))
	must(t, setlk(b, unix.F_WRLCK, 0, 50, false))
	wantErrno(t, "F_SETLK of the part A kept", setlk(b, unix.F_WRLCK, 50, 1, false), syscall.EAGAIN)

	// A's F_SETLKW for B's bytes waits until B's file is closed.
	got := make(chan error, 1)
	go func() { got <- setlk(a, unix.F_WRLCK, 0, 50, true) }()
	select {
	case err := <-got:
		t.Fatalf("F_SETLKW returned (%v) while B holds the bytes", err)
	case <-time.After(200 * time.Millisecond):
	}
	must(t, b.Close())
	select {
	case err := <-got:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("F_SETLKW still waiting 10 s after B closed its file")
	}

	// Closing any descriptor of the file releases all of the process's
	// locks on it (fcntl(2)): B's second open sees them go.
	b2, err := os.OpenFile(other, os.O_RDWR, 0)
	must(t, err)
	defer b2.Close()
	wantErrno(t, "F_SETLK while A holds 0-99", setlk(b2, unix.F_WRLCK, 0, 100, false), syscall.EAGAIN)
	a2, err := os.Open(p)
	must(t, err)
	must(t, a2.Close())
	eventually(t, "A's locks to go when another of its descriptors closed", func() bool {
		return setlk(b2, unix.F_WRLCK, 0, 100, false) == nil
	})
	// A write lock needs the file open for writing.
	r, err := os.Open(other)
	must(t, err)
	defer r.Close()
	wantErrno(t, "F_WRLCK on a read-only descriptor", setlk(r, unix.F_WRLCK, 500, 1, false), syscall.EBADF)
}

func testFallocate(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	fd, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	must(t, err)
	defer fd.Close()
	_, err = fd.Write([]byte("0123456789"))
	must(t, err)
	must(t, unix.Fallocate(int(fd.Fd()), 0, 0, 1<<20))
	size := func() int64 {
		st, err := fd.Stat()
		must(t, err)
		return st.Size()
	}
	if got := size(); got != 1<<20 {
		t.Errorf("size after fallocate 0..1 MiB: %d", got)
	}
	buf := make([]byte, 20)
	n, err := fd.ReadAt(buf, 0)
	must(t, err)
	if string(buf[:n]) != "0123456789\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" {
		t.Errorf("contents after fallocate: %q", buf[:n])
	}
	// Never shorter.
	must(t, unix.Fallocate(int(fd.Fd()), 0, 0, 100))
	if got := size(); got != 1<<20 {
		t.Errorf("fallocate of a smaller range changed the size to %d", got)
	}
	// KEEP_SIZE: accepted, changes nothing.
	must(t, unix.Fallocate(int(fd.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 4<<20))
	if got := size(); got != 1<<20 {
		t.Errorf("fallocate with KEEP_SIZE changed the size to %d", got)
	}
	wantErrno(t, "punch hole", unix.Fallocate(int(fd.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 10), syscall.EOPNOTSUPP)
	must(t, fd.Close())
	if a := f.sdkStat(t, p); a.Size != 1<<20 {
		t.Errorf("server size %d, want 1 MiB", a.Size)
	}
	// The fallocate(1) command, past the end.
	if bin, err := exec.LookPath("fallocate"); err == nil {
		run(t, "", bin, "-o", "1048576", "-l", "1048576", p)
		if a := f.sdkStat(t, p); a.Size != 2<<20 {
			t.Errorf("after fallocate -o 1MiB -l 1MiB: server size %d, want 2 MiB", a.Size)
		}
	}
	got := f.sdkRead(t, p)
	if len(got) != 2<<20 && len(got) != 1<<20 || string(got[:10]) != "0123456789" {
		t.Errorf("read back %d bytes starting %q", len(got), got[:min(10, len(got))])
	}
	for i, c := range got[10:] {
		if c != 0 {
			t.Fatalf("byte %d is %d, want 0", 10+i, c)
		}
	}
}
