package fuse

// TestModelMount runs internal/model's op stream through a real mount: each
// op becomes the system calls a program would make, on a thread that
// carries the op's caller (fsuid, fsgid, supplementary groups, no
// capabilities unless root) and whose root directory is the mount, so the
// model's absolute paths and symlink targets mean on the mount what they
// mean in the namespace. The kernel walks the paths, so this checks the
// model's path rules against Linux itself as well as the mount.
//
// The kernel and the system call interface cannot express everything the
// model offers; mountExpressible keeps those ops out of the stream (the
// engine and RPC variants cover them) rather than weakening the oracle:
//
//   - inode-level ops: a mount has no calls by inode number;
//   - summary: no system call; statfs: statfs(2) reports blocks and free
//     counts, not the bytes and inodes the model counts;
//   - strings with a NUL: system calls take C strings;
//   - relative paths: the model's API refuses them (EINVAL), the kernel
//     resolves them from the working directory;
//   - lookup of a name with a '/': the kernel would walk it;
//   - rename flags other than none, RENAME_NOREPLACE or RENAME_EXCHANGE:
//     renameat2 refuses both of those together before it looks the paths
//     up, the model (as the server's path form) after; it accepts
//     RENAME_WHITEOUT and looks the paths up before the service refuses
//     it;
//   - readdir with a cursor or a limit: getdents has neither (the listing
//     is read whole, sorted by name, "." and ".." left out);
//   - truncate of a path without following it: truncate(2) follows;
//   - arguments a system call refuses on entry, before it looks the path
//     up: mknod of a directory or an unknown type, a symlink target that is
//     empty or too long; the model (as the server's path form) resolves the
//     parent first;
//   - rename by a caller other than root: renameat2 needs search
//     permission on both parents before it looks either name up, the model
//     (as the server's path form) resolves both paths first, so when the
//     first parent is not searchable and the second path fails, the errors
//     come in another order;
//   - link by a caller other than root: fs.protected_hardlinks (on by
//     default) lets only the owner, or a caller who may read and write a
//     regular file, link it, a policy the model does not have;
//   - a trailing slash on a path that names an entry to create or remove,
//     other than mkdir's and rmdir's: Linux demands a directory there
//     (mknod "/f/" is ENOENT, unlink "/f/" ENOTDIR, before any permission
//     check); the engine's path composition, which the model follows,
//     trims the slash;
//   - in the variant without default_permissions, callers other than root:
//     the kernel then checks the types (unlink of a directory is EISDIR)
//     but not the permissions, which the service checks after, so the
//     errors come in another order than Linux's (EACCES first). The
//     variants with default_permissions have all callers.
//
// The server behind the mount owns partition 0 (the kernel's root node is
// inode 1), the model partition 7, so inode numbers are compared without
// their partition. The server's clock is each op's time, so every time
// stamp must match.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/model"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

func TestModelMount(t *testing.T) {
	requireFUSE(t)
	steps, seeds := 800, 2
	if testing.Short() {
		steps, seeds = 200, 1
	}
	for _, v := range []struct {
		name  string
		names []string
		opts  Options
	}{
		{"small", model.Names, Options{AllowOther: true}},
		{"wide", model.WideNames, Options{AllowOther: true}},
		{"small-service-permissions", model.Names, Options{AllowOther: true, NoDefaultPermissions: true}},
	} {
		for seed := int64(1); seed <= int64(seeds); seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", v.name, seed), func(t *testing.T) {
				allow := mountExpressible
				if v.opts.NoDefaultPermissions {
					allow = func(op model.Op) bool { return op.Cred.UID == 0 && mountExpressible(op) }
				}
				cfg := model.Config{Seed: seed, Steps: steps, Names: v.names, Allow: allow, Normalize: mountNormalize}
				var last *mountTarget
				newTarget := func() model.Target {
					if last != nil {
						last.close()
					}
					last = newMountTarget(t, v.opts)
					return last
				}
				if f := model.Run(cfg, newTarget()); f != nil {
					ops, g := model.Shrink(cfg, f.Ops, newTarget)
					t.Fatalf("%v\nshrunk to %d ops (%s):\n%s", f, len(ops), g.Signature(), model.FormatOps(ops))
				}
			})
		}
	}
}

// mountExpressible keeps out of the stream the ops a mount cannot express;
// the file's comment says why for each.
func mountExpressible(op model.Op) bool {
	if op.Kind.InodeLevel() || op.Kind == model.KSummary || op.Kind == model.KStatfs {
		return false
	}
	for _, s := range []string{op.Path, op.Path2, op.Target, op.Name, op.Name2, op.Cursor} {
		if strings.IndexByte(s, 0) >= 0 {
			return false
		}
	}
	for _, p := range []string{op.Path, op.Path2} {
		if p != "" && p[0] != '/' {
			return false
		}
	}
	switch op.Kind {
	case model.KMknod, model.KSymlink, model.KUnlink:
		if strings.HasSuffix(op.Path, "/") {
			return false
		}
	case model.KLink, model.KRename:
		if strings.HasSuffix(op.Path, "/") || strings.HasSuffix(op.Path2, "/") {
			return false
		}
	}
	switch op.Kind {
	case model.KSymlink:
		return op.Target != "" && len(op.Target) < model.PathMax
	case model.KLookup:
		return !strings.Contains(op.Name, "/")
	case model.KRename:
		return (op.Flags == 0 || op.Flags == model.RenameNoReplace || op.Flags == model.RenameExchange) && op.Cred.UID == 0
	case model.KLink:
		return op.Cred.UID == 0
	case model.KMknod:
		switch op.Mode & model.S_IFMT {
		case 0, model.S_IFREG, model.S_IFIFO, model.S_IFSOCK, model.S_IFCHR, model.S_IFBLK:
			return true
		}
		return false
	case model.KReaddir:
		return op.Cursor == "" && op.Limit == 0
	case model.KSetAttr:
		_, ok := setattrCall(op)
		return ok
	}
	return true
}

// mountNormalize drops the partition from inode numbers.
func mountNormalize(_ model.Op, r *model.Result) {
	local := func(a *model.Attr) { a.Ino = model.Ino(a.Ino.Local()) }
	if r.Attr != nil {
		a := *r.Attr
		local(&a)
		r.Attr = &a
	}
	for i := range r.Ents {
		r.Ents[i].Ino = model.Ino(r.Ents[i].Ino.Local())
		if r.Ents[i].Attr != (model.Attr{}) {
			local(&r.Ents[i].Attr)
		}
	}
}

// mountTarget is a mount as a model.Target. It belongs to the test's
// goroutine; each caller's calls run on that caller's thread (a worker).
type mountTarget struct {
	t       *testing.T
	clock   atomic.Int64
	workers map[string]*credWorker
	mnt     string
	unmount func()
}

func newMountTarget(t *testing.T, opts Options) *mountTarget {
	tg := &mountTarget{t: t, workers: map[string]*credWorker{}}
	tg.clock.Store(1_000_000)
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), Clock: tg.clock.Load})
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	tg.mnt = filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(tg.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := MountAt(c, tg.mnt, opts)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	tg.unmount = func() {
		unmountBounded(t, m)
		c.Close()
	}
	t.Cleanup(tg.close)
	return tg
}

// close stops the workers (they leave the mount) and unmounts; a second
// call does nothing.
func (tg *mountTarget) close() {
	for _, w := range tg.workers {
		w.stop()
	}
	tg.workers = map[string]*credWorker{}
	if tg.unmount != nil {
		tg.unmount()
		tg.unmount = nil
	}
}

// credWorker is a goroutine locked to its own thread, which never returns
// to the scheduler: the thread has its own root directory (the mount), a
// zero umask, and the caller's file system identity.
type credWorker struct {
	calls chan func()
	done  chan struct{}
	home  int // the process's root directory, to leave the mount by
}

func (tg *mountTarget) worker(c model.Cred) *credWorker {
	key := model.CredString(c)
	if w, ok := tg.workers[key]; ok {
		return w
	}
	w := &credWorker{calls: make(chan func()), done: make(chan struct{})}
	ready := make(chan error)
	go w.loop(tg.mnt, c, ready)
	if err := <-ready; err != nil {
		tg.t.Fatalf("worker for %s: %v", key, err)
	}
	tg.workers[key] = w
	return w
}

func (w *credWorker) loop(mnt string, c model.Cred, ready chan<- error) {
	defer close(w.done)
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	if err := w.become(mnt, c); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for f := range w.calls {
		f()
	}
	w.leave()
}

// leave gives the thread back the process's root and capabilities, so
// that the mount is not busy while the thread ends.
func (w *credWorker) leave() {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) == nil {
		data[0].Effective, data[1].Effective = data[0].Permitted, data[1].Permitted
		unix.Capset(&hdr, &data[0])
	}
	unix.Setfsuid(0)
	unix.Fchdir(w.home)
	unix.Chroot(".")
	unix.Close(w.home)
}

func (w *credWorker) become(mnt string, c model.Cred) error {
	// The runtime's preemption signal would interrupt a call waiting for
	// the mount (EINTR); this thread is preempted at its system calls.
	var urg unix.Sigset_t
	urg.Val[(unix.SIGURG-1)/64] |= 1 << ((unix.SIGURG - 1) % 64)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &urg, nil); err != nil {
		return err
	}
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return err
	}
	home, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	w.home = home
	if err := unix.Chroot(mnt); err != nil {
		return err
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	unix.Umask(0)
	groups := make([]int, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = int(g)
	}
	if err := unix.Setgroups(groups); err != nil {
		return err
	}
	if err := unix.Setfsgid(int(c.GID)); err != nil {
		return err
	}
	if err := unix.Setfsuid(int(c.UID)); err != nil {
		return err
	}
	if c.UID == 0 {
		return nil
	}
	// A user other than root has no capabilities (fsuid alone drops only
	// the file system ones; CAP_SYS_ADMIN would still grant trusted.*).
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[0].Effective, data[1].Effective = 0, 0
	return unix.Capset(&hdr, &data[0])
}

// run runs f on the worker's thread.
func (w *credWorker) run(f func()) {
	done := make(chan struct{})
	w.calls <- func() { f(); close(done) }
	<-done
}

func (w *credWorker) stop() {
	close(w.calls)
	<-w.done
}

// setattrCall returns the system call for op's setattr, if there is one.
func setattrCall(op model.Op) (string, bool) {
	const times = model.SetAtime | model.SetMtime | model.SetAtimeNow | model.SetMtimeNow
	v := op.Set.Valid
	switch {
	case v == 0:
		return "stat", true
	case v == model.SetMode:
		return "chmod", true
	case v&^(model.SetUID|model.SetGID) == 0:
		return "chown", true
	case v == model.SetSize:
		return "truncate", op.Follow
	case v&^times == 0:
		// utimensat says each time once: a value or UTIME_NOW.
		both := func(a, b uint32) bool { return v&a != 0 && v&b != 0 }
		return "utimensat", !both(model.SetAtime, model.SetAtimeNow) && !both(model.SetMtime, model.SetMtimeNow)
	}
	return "", false
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return syscall.EIO
}

func attrOfStat(st *unix.Stat_t) *model.Attr {
	return &model.Attr{
		Ino: model.Ino(st.Ino), Mode: st.Mode, UID: st.Uid, GID: st.Gid, Nlink: uint32(st.Nlink), Size: uint64(st.Size),
		Atime: st.Atim.Nano(), Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Rdev: uint32(st.Rdev),
	}
}

// stat returns the attributes at path as the root worker sees them.
func (tg *mountTarget) statAsRoot(path string, follow bool) (*model.Attr, syscall.Errno) {
	var st unix.Stat_t
	var err error
	tg.worker(model.CredRoot).run(func() {
		if follow {
			err = unix.Stat(path, &st)
		} else {
			err = unix.Lstat(path, &st)
		}
	})
	if err != nil {
		return nil, errnoOf(err)
	}
	return attrOfStat(&st), 0
}

func ts(ns int64) unix.Timespec { return unix.NsecToTimespec(ns) }

func (tg *mountTarget) Apply(op model.Op, now int64) (model.Result, error) {
	if now > 0 {
		tg.clock.Store(now)
	}
	var r model.Result
	var err error
	w := tg.worker(op.Cred)
	root := tg.worker(model.CredRoot)
	p := op.Path
	// attrAfter fills r.Attr from path once the call worked.
	attrAfter := func(path string, follow bool) {
		if err != nil {
			return
		}
		var en syscall.Errno
		if r.Attr, en = tg.statAsRoot(path, follow); en != 0 {
			err = en
		}
	}
	// pre resolves the path as the caller first, so that a missing path
	// is reported before the xattr call's own argument checks, as the
	// model composes them (resolve, then the f-variant on the node).
	pre := func() bool {
		var st unix.Stat_t
		if op.Follow {
			err = unix.Stat(p, &st)
		} else {
			err = unix.Lstat(p, &st)
		}
		return err == nil
	}
	switch op.Kind {
	case model.KMkdir:
		w.run(func() { err = unix.Mkdir(p, op.Mode) })
		attrAfter(p, false)
	case model.KMknod:
		w.run(func() { err = unix.Mknod(p, op.Mode, int(op.Rdev)) })
		attrAfter(p, false)
	case model.KSymlink:
		w.run(func() { err = unix.Symlink(op.Target, p) })
		attrAfter(p, false)
	case model.KLink:
		w.run(func() { err = unix.Link(p, op.Path2) })
		attrAfter(op.Path2, false)
	case model.KUnlink:
		w.run(func() { err = unix.Unlink(p) })
	case model.KRmdir:
		w.run(func() { err = unix.Rmdir(p) })
	case model.KRename:
		w.run(func() { err = unix.Renameat2(unix.AT_FDCWD, p, unix.AT_FDCWD, op.Path2, uint(op.Flags)) })
	case model.KSetAttr:
		s := op.Set
		call, _ := setattrCall(op)
		flags := 0
		if !op.Follow {
			flags = unix.AT_SYMLINK_NOFOLLOW
		}
		w.run(func() {
			switch call {
			case "stat":
				pre()
			case "chmod":
				err = fchmodat2(p, s.Mode, flags)
			case "chown":
				uid, gid := -1, -1
				if s.Valid&model.SetUID != 0 {
					uid = int(s.UID)
				}
				if s.Valid&model.SetGID != 0 {
					gid = int(s.GID)
				}
				err = unix.Fchownat(unix.AT_FDCWD, p, uid, gid, flags)
			case "truncate":
				err = unix.Truncate(p, int64(s.Size))
			case "utimensat":
				a, m := unix.Timespec{Nsec: unix.UTIME_OMIT}, unix.Timespec{Nsec: unix.UTIME_OMIT}
				switch {
				case s.Valid&model.SetAtimeNow != 0:
					a.Nsec = unix.UTIME_NOW
				case s.Valid&model.SetAtime != 0:
					a = ts(s.Atime)
				}
				switch {
				case s.Valid&model.SetMtimeNow != 0:
					m.Nsec = unix.UTIME_NOW
				case s.Valid&model.SetMtime != 0:
					m = ts(s.Mtime)
				}
				err = unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{a, m}, flags)
			}
		})
		attrAfter(p, op.Follow)
	case model.KSetXattr:
		w.run(func() {
			if !pre() {
				return
			}
			if op.Follow {
				err = unix.Setxattr(p, op.Name, op.Value, int(op.Flags))
			} else {
				err = unix.Lsetxattr(p, op.Name, op.Value, int(op.Flags))
			}
		})
	case model.KGetXattr:
		w.run(func() {
			if !pre() {
				return
			}
			buf := make([]byte, model.XattrValue)
			var n int
			if op.Follow {
				n, err = unix.Getxattr(p, op.Name, buf)
			} else {
				n, err = unix.Lgetxattr(p, op.Name, buf)
			}
			if err == nil {
				r.Text = string(buf[:n])
			}
		})
	case model.KListXattr:
		w.run(func() {
			buf := make([]byte, 1<<16)
			var n int
			if op.Follow {
				n, err = unix.Listxattr(p, buf)
			} else {
				n, err = unix.Llistxattr(p, buf)
			}
			if err == nil {
				r.Text = listText(buf[:n])
			}
		})
	case model.KRemoveXattr:
		w.run(func() {
			if !pre() {
				return
			}
			if op.Follow {
				err = unix.Removexattr(p, op.Name)
			} else {
				err = unix.Lremovexattr(p, op.Name)
			}
		})
	case model.KLookup:
		// The directory is found as root; the lookup is the caller's.
		fd := -1
		root.run(func() { fd, err = unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) })
		if err != nil {
			break
		}
		var st unix.Stat_t
		w.run(func() { err = unix.Fstatat(fd, op.Name, &st, unix.AT_SYMLINK_NOFOLLOW) })
		unix.Close(fd)
		if err == nil {
			r.Attr = attrOfStat(&st)
		}
	case model.KResolve:
		var st unix.Stat_t
		w.run(func() {
			if op.Follow {
				err = unix.Stat(p, &st)
			} else {
				err = unix.Lstat(p, &st)
			}
		})
		if err == nil {
			r.Attr = attrOfStat(&st)
		}
	case model.KReaddir:
		r, err = tg.readdir(w, root, op)
	case model.KReadlink:
		w.run(func() {
			buf := make([]byte, model.PathMax)
			var n int
			if n, err = unix.Readlink(p, buf); err == nil {
				r.Text = string(buf[:n])
			}
		})
	default:
		return model.Result{}, errors.New("not expressible on a mount: " + string(op.Kind))
	}
	if err != nil {
		return model.Result{Err: errnoOf(err)}, nil
	}
	return r, nil
}

// readdir lists a directory found as root, opened for reading as the
// caller, whole; with attributes, each entry is stat'ed as root.
func (tg *mountTarget) readdir(w, root *credWorker, op model.Op) (model.Result, error) {
	var r model.Result
	var err error
	dfd := -1
	root.run(func() { dfd, err = unix.Open(op.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return r, err
	}
	defer unix.Close(dfd)
	var buf []byte
	w.run(func() {
		fd, e := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if e != nil {
			err = e
			return
		}
		defer unix.Close(fd)
		chunk := make([]byte, 1<<16)
		for {
			n, e := unix.Getdents(fd, chunk)
			if e != nil {
				err = e
				return
			}
			if n <= 0 {
				return
			}
			buf = append(buf, chunk[:n]...)
		}
	})
	if err != nil {
		return r, err
	}
	for len(buf) >= 19 {
		ino := binary.LittleEndian.Uint64(buf[0:8])
		reclen := int(binary.LittleEndian.Uint16(buf[16:18]))
		typ := buf[18]
		name := buf[19:reclen]
		if i := strings.IndexByte(string(name), 0); i >= 0 {
			name = name[:i]
		}
		buf = buf[reclen:]
		if n := string(name); n != "." && n != ".." {
			r.Ents = append(r.Ents, model.Dirent{Name: n, Ino: model.Ino(ino), Type: uint32(typ) << 12})
		}
	}
	sort.Slice(r.Ents, func(i, j int) bool { return r.Ents[i].Name < r.Ents[j].Name })
	if op.Attrs {
		for i := range r.Ents {
			var st unix.Stat_t
			root.run(func() { err = unix.Fstatat(dfd, r.Ents[i].Name, &st, unix.AT_SYMLINK_NOFOLLOW) })
			if err != nil {
				return model.Result{}, err
			}
			r.Ents[i].Attr = *attrOfStat(&st)
		}
	}
	if len(r.Ents) > 0 {
		r.Next = r.Ents[len(r.Ents)-1].Name
	}
	r.EOF = true
	return r, nil
}

// listText formats listxattr's NUL-separated names as the model does,
// sorted (listxattr(2) promises no order).
func listText(buf []byte) string {
	names := []string{}
	for _, n := range strings.Split(string(buf), "\x00") {
		if n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	b := []byte{'['}
	for i, n := range names {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendQuote(b, n)
	}
	return string(append(b, ']'))
}

// fchmodat2 is chmod that can refuse to follow a final symlink (Linux
// 6.6): unix.Fchmodat answers EOPNOTSUPP for AT_SYMLINK_NOFOLLOW without
// asking the kernel.
func fchmodat2(path string, mode uint32, flags int) error {
	pp, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	dirfd := unix.AT_FDCWD
	_, _, en := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(dirfd), uintptr(unsafe.Pointer(pp)), uintptr(mode), uintptr(flags), 0, 0)
	if en != 0 {
		return en
	}
	return nil
}
