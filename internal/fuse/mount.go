package fuse

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/canopyfs/canopy/client"
)

// maxWrite is the largest READ or WRITE request the kernel sends (it caps
// it at its own limit, 1 MiB by default).
const maxWrite = 1 << 20

// Mount is a mounted Canopy namespace, served by go-fuse's goroutines
// until it is unmounted.
type Mount struct {
	FS   *FS
	dir  string
	srv  *gofuse.Server
	done chan struct{} // closed when the kernel ends the connection
}

// MountAt mounts c's namespace at dir (an existing directory) and serves
// it until Close or an unmount from outside. As root it calls mount(2)
// itself; otherwise it needs fusermount.
func MountAt(c *client.Client, dir string, opts Options) (*Mount, error) {
	if opts.AttrTimeout < 0 || opts.EntryTimeout < 0 || opts.NegativeTimeout < 0 {
		return nil, fmt.Errorf("mount %s: negative cache timeout", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	fs := New(c, opts)
	mo := &gofuse.MountOptions{
		FsName:        opts.FsName,
		Name:          "canopy",
		AllowOther:    opts.AllowOther,
		DirectMount:   true,
		MaxBackground: 64,
		MaxWrite:      maxWrite,
		// Reads answer with bytes in memory (the block cache), never a
		// file descriptor to splice from; without this the library
		// would still stage every reply's header in a pipe, and log a
		// failure for every reply of 1 MiB (a pipe holds at most 1 MiB
		// by default, /proc/sys/fs/pipe-max-size).
		DisableSplice: true,
		Debug:         opts.Debug,
		EnableLocks:   true, // flock and fcntl locks come to the mount, which asks the service
		// The service clears set-user-ID and set-group-ID in the same
		// change as the write's commit or the truncate, as the caller; the
		// kernel must not send that as a mode change of its own, which a
		// writer who does not own the file may not make.
		//
		// POSIX ACLs: the kernel reads system.posix_acl_access for its
		// own checks (default_permissions), drops its cached ACLs and
		// attributes when it sets an ACL or the mode, and, with
		// DONT_MASK, leaves the umask to the service, which applies it
		// only when the parent has no default ACL. The kernel turns on
		// default_permissions with ACLs, so a mount without it has none
		// there (the service still checks ACLs).
		EnableAcl:         !opts.NoDefaultPermissions,
		ExtraCapabilities: gofuse.CAP_HANDLE_KILLPRIV_V2 | gofuse.CAP_DONT_MASK,
	}
	if mo.FsName == "" {
		mo.FsName = "canopy"
	}
	if !opts.NoDefaultPermissions {
		mo.Options = append(mo.Options, "default_permissions")
	}
	if opts.ReadOnly {
		mo.DirectMountFlags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_RDONLY
	}
	// What the library reports goes to the mount's log as warnings;
	// its debug trace goes to stderr.
	mo.Logger = slog.NewLogLogger(fs.log.Handler(), slog.LevelWarn)
	if opts.Debug {
		mo.Logger = log.New(os.Stderr, "fuse: ", log.Lmicroseconds)
	}
	srv, err := gofuse.NewServer(fs, abs, mo)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", abs, err)
	}
	m := &Mount{FS: fs, dir: abs, srv: srv, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		srv.Serve()
		fs.syncAtEnd()
	}()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, fmt.Errorf("mount %s: %w", abs, err)
	}
	return m, nil
}

// Dir is the absolute mount point.
func (m *Mount) Dir() string { return m.dir }

// Done is closed when the mount has ended: after Close, or after an
// unmount from outside (canopy umount, umount(8)).
func (m *Mount) Done() <-chan struct{} { return m.done }

// Close unmounts and waits until the kernel has ended the connection. If
// the mount is busy it is detached lazily: it disappears from the
// namespace at once, and Close returns when the last open file on it is
// closed.
func (m *Mount) Close() error {
	select {
	case <-m.done:
		return nil
	default:
	}
	if err := m.srv.Unmount(); err != nil {
		if lerr := syscall.Unmount(m.dir, syscall.MNT_DETACH); lerr != nil {
			return fmt.Errorf("unmount %s: %w (lazy: %v)", m.dir, err, lerr)
		}
	}
	<-m.done
	return nil
}

// ErrNotMounted is returned by Unmount for a directory that is not a
// mount point.
var ErrNotMounted = errors.New("not mounted")

// Unmount unmounts the file system at dir. If it is busy and lazy is set,
// it is detached lazily instead (gone from the namespace at once, ended
// when its last open file is closed); detached then says so. Without
// root, it asks fusermount.
func Unmount(dir string, lazy bool) (detached bool, err error) {
	err = syscall.Unmount(dir, 0)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, syscall.EBUSY) && lazy:
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			return false, fmt.Errorf("unmount %s lazily: %w", dir, err)
		}
		return true, nil
	case errors.Is(err, syscall.EINVAL):
		return false, fmt.Errorf("unmount %s: %w", dir, ErrNotMounted)
	case errors.Is(err, syscall.EPERM):
		return fusermountUnmount(dir, lazy)
	}
	return false, fmt.Errorf("unmount %s: %w", dir, err)
}

// fusermountUnmount unmounts through the setuid helper, for users other
// than root.
func fusermountUnmount(dir string, lazy bool) (bool, error) {
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		if bin, err = exec.LookPath("fusermount"); err != nil {
			return false, fmt.Errorf("unmount %s: %w (and no fusermount)", dir, syscall.EPERM)
		}
	}
	args := []string{"-u", dir}
	if lazy {
		args = []string{"-u", "-z", dir}
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		return false, fmt.Errorf("unmount %s: %s: %w", dir, out, err)
	}
	return false, nil
}
