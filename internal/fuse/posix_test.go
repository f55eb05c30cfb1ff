package fuse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
)

// A POSIX case runs in its own directory of one shared mount.
type posixCase struct {
	name string
	run  func(t *testing.T, f *fixture, dir string)
}

// TestPOSIX runs the POSIX cases on a real mount of a real server and
// reports how many passed and failed. The mount has the default options
// of `canopy mount`, and allow_other so that the permission cases can
// run callers as other uids.
func TestPOSIX(t *testing.T) {
	opts := DefaultOptions()
	opts.AllowOther = true
	f := mountTest(t, opts)
	openUp(t, f.mnt)
	passed, failed := 0, 0
	for _, pc := range posixCases() {
		dir := f.path(pc.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if t.Run(pc.name, func(t *testing.T) { pc.run(t, f, dir) }) {
			passed++
		} else {
			failed++
		}
	}
	t.Logf("posix: %d passed, %d failed", passed, failed)
}

func posixCases() []posixCase {
	return slices.Concat(metadataCases(), dataCases(), lockCases(), permCases(), programCases())
}

func metadataCases() []posixCase {
	return []posixCase{
		{"mkdir_rmdir", testMkdirRmdir},
		{"create_unlink", testCreateUnlink},
		{"mknod_fifo", testMknodFifo},
		{"rename", testRename},
		{"rename_noreplace", testRenameNoReplace},
		{"rename_exchange", testRenameExchange},
		{"link", testLink},
		{"symlink_readlink", testSymlink},
		{"chmod", testChmod},
		{"chown", testChown},
		{"utimes", testUtimes},
		{"xattrs", testXattrs},
		{"statfs", testStatfs},
		{"long_names", testLongNames},
		{"wrong_types", testWrongTypes},
		{"readdir_pages", testReaddirPages},
		{"readdir_seek", testReaddirSeek},
		{"rm_rf_while_listing", testRmRf},
		{"ls_find_tree", testLsFind},
		{"cp_diff_tar_empty", testCopyTreeEmpty},
		{"access", testAccess},
	}
}

// wantErrno fails unless err carries errno.
func wantErrno(t *testing.T, what string, err error, errno syscall.Errno) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Errorf("%s: got %v, want %v", what, err, errno)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// rel is p's path inside the namespace.
func (f *fixture) rel(p string) string {
	r, err := filepath.Rel(f.mnt, p)
	if err != nil || strings.HasPrefix(r, "..") {
		panic("not below the mount: " + p)
	}
	return "/" + filepath.ToSlash(r)
}

// sdkStat reads p's attributes from the server directly, past any cache.
func (f *fixture) sdkStat(t *testing.T, p string) client.Attr {
	t.Helper()
	fi, err := f.c.Lstat(t.Context(), f.rel(p))
	if err != nil {
		t.Fatalf("server stat %s: %v", f.rel(p), err)
	}
	return fi.Attr()
}

func lstat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatalf("lstat %s: %v", p, err)
	}
	return &st
}

func testMkdirRmdir(t *testing.T, f *fixture, dir string) {
	d := filepath.Join(dir, "d")
	must(t, os.Mkdir(d, 0o750))
	st := lstat(t, d)
	if st.Mode != syscall.S_IFDIR|0o750 {
		t.Errorf("mode %o, want %o", st.Mode, syscall.S_IFDIR|0o750)
	}
	if a := f.sdkStat(t, d); a.Mode != st.Mode || uint64(a.Ino) != st.Ino {
		t.Errorf("server has mode %o ino %d, mount %o %d", a.Mode, a.Ino, st.Mode, st.Ino)
	}
	wantErrno(t, "mkdir existing", os.Mkdir(d, 0o755), syscall.EEXIST)
	must(t, os.Mkdir(filepath.Join(d, "sub"), 0o755))
	wantErrno(t, "rmdir non-empty", syscall.Rmdir(d), syscall.ENOTEMPTY)
	if n := lstat(t, d).Nlink; n != 3 {
		t.Errorf("nlink of a directory with one subdirectory: %d, want 3", n)
	}
	must(t, syscall.Rmdir(filepath.Join(d, "sub")))
	must(t, syscall.Rmdir(d))
	_, err := os.Lstat(d)
	wantErrno(t, "stat removed", err, syscall.ENOENT)
	_, err = f.c.Lstat(t.Context(), f.rel(d))
	wantErrno(t, "server stat removed", err, syscall.ENOENT)
	wantErrno(t, "mkdir in missing", os.Mkdir(filepath.Join(dir, "nx", "d"), 0o755), syscall.ENOENT)
}

func testCreateUnlink(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	fd, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	must(t, err)
	must(t, fd.Close())
	_, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	wantErrno(t, "O_EXCL on existing", err, syscall.EEXIST)
	if a := f.sdkStat(t, p); a.Mode != syscall.S_IFREG|0o640 || a.Size != 0 {
		t.Errorf("server: mode %o size %d", a.Mode, a.Size)
	}
	must(t, syscall.Unlink(p))
	_, err = os.Lstat(p)
	wantErrno(t, "stat unlinked", err, syscall.ENOENT)
	wantErrno(t, "unlink again", syscall.Unlink(p), syscall.ENOENT)
}

func testMknodFifo(t *testing.T, f *fixture, dir string) {
	reg := filepath.Join(dir, "reg")
	must(t, unix.Mknod(reg, syscall.S_IFREG|0o600, 0))
	fifo := filepath.Join(dir, "fifo")
	must(t, unix.Mkfifo(fifo, 0o644))
	sock := filepath.Join(dir, "sock")
	must(t, unix.Mknod(sock, syscall.S_IFSOCK|0o600, 0))
	for p, mode := range map[string]uint32{reg: syscall.S_IFREG | 0o600, fifo: syscall.S_IFIFO | 0o644, sock: syscall.S_IFSOCK | 0o600} {
		if st := lstat(t, p); st.Mode != mode {
			t.Errorf("%s: mount mode %o, want %o", filepath.Base(p), st.Mode, mode)
		}
		if a := f.sdkStat(t, p); a.Mode != mode {
			t.Errorf("%s: server mode %o, want %o", filepath.Base(p), a.Mode, mode)
		}
	}
	fi, err := os.Lstat(fifo)
	must(t, err)
	if fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo: %v", fi.Mode())
	}
	wantErrno(t, "mknod existing", unix.Mkfifo(fifo, 0o644), syscall.EEXIST)
}

func testRename(t *testing.T, f *fixture, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	must(t, os.WriteFile(a, nil, 0o644))
	ino := lstat(t, a).Ino
	must(t, os.Rename(a, b))
	if st := lstat(t, b); st.Ino != ino {
		t.Errorf("renamed inode %d, want %d", st.Ino, ino)
	}
	_, err := os.Lstat(a)
	wantErrno(t, "old name", err, syscall.ENOENT)
	// Over an existing file: replaced.
	must(t, os.WriteFile(a, nil, 0o600))
	must(t, os.Rename(a, b))
	if st := lstat(t, b); st.Mode&0o777 != 0o600 {
		t.Errorf("replaced file mode %o, want 600", st.Mode&0o777)
	}
	// A directory to another directory.
	d1, d2 := filepath.Join(dir, "d1"), filepath.Join(dir, "d2")
	must(t, os.MkdirAll(filepath.Join(d1, "x"), 0o755))
	must(t, os.Mkdir(d2, 0o755))
	must(t, os.Rename(filepath.Join(d1, "x"), filepath.Join(d2, "x")))
	if _, err := f.c.Lstat(t.Context(), f.rel(filepath.Join(d2, "x"))); err != nil {
		t.Errorf("server: %v", err)
	}
	wantErrno(t, "dir into own subtree", os.Rename(d2, filepath.Join(d2, "x", "y")), syscall.EINVAL)
	wantErrno(t, "dir over non-empty dir", syscall.Rename(d1, d2), syscall.ENOTEMPTY)
	wantErrno(t, "missing source", os.Rename(filepath.Join(dir, "nx"), a), syscall.ENOENT)
}

func testRenameNoReplace(t *testing.T, f *fixture, dir string) {
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	must(t, os.WriteFile(a, nil, 0o644))
	must(t, os.WriteFile(b, nil, 0o644))
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
	wantErrno(t, "noreplace onto existing", err, syscall.EEXIST)
	must(t, unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, c, unix.RENAME_NOREPLACE))
	if _, err := f.c.Lstat(t.Context(), f.rel(c)); err != nil {
		t.Errorf("server: %v", err)
	}
	err = unix.Renameat2(unix.AT_FDCWD, c, unix.AT_FDCWD, a, unix.RENAME_WHITEOUT)
	if err == nil {
		t.Errorf("RENAME_WHITEOUT succeeded")
	}
}

func testRenameExchange(t *testing.T, f *fixture, dir string) {
	a, d := filepath.Join(dir, "a"), filepath.Join(dir, "d")
	must(t, os.WriteFile(a, nil, 0o644))
	must(t, os.Mkdir(d, 0o755))
	ia, id := lstat(t, a).Ino, lstat(t, d).Ino
	must(t, unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, d, unix.RENAME_EXCHANGE))
	if got := lstat(t, a); got.Ino != id || got.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		t.Errorf("a after exchange: ino %d mode %o, want the directory %d", got.Ino, got.Mode, id)
	}
	if got := lstat(t, d); got.Ino != ia || got.Mode&syscall.S_IFMT != syscall.S_IFREG {
		t.Errorf("d after exchange: ino %d mode %o, want the file %d", got.Ino, got.Mode, ia)
	}
	if sa := f.sdkStat(t, a); uint64(sa.Ino) != id {
		t.Errorf("server: a is %d, want %d", sa.Ino, id)
	}
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, filepath.Join(dir, "nx"), unix.RENAME_EXCHANGE)
	wantErrno(t, "exchange with missing", err, syscall.ENOENT)
	err = unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, d, unix.RENAME_EXCHANGE|unix.RENAME_NOREPLACE)
	wantErrno(t, "exchange|noreplace", err, syscall.EINVAL)
}

func testLink(t *testing.T, f *fixture, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	must(t, os.WriteFile(a, nil, 0o644))
	must(t, os.Link(a, b))
	sa, sb := lstat(t, a), lstat(t, b)
	if sa.Ino != sb.Ino || sb.Nlink != 2 {
		t.Errorf("link: inodes %d %d, nlink %d", sa.Ino, sb.Ino, sb.Nlink)
	}
	if s := f.sdkStat(t, a); s.Nlink != 2 {
		t.Errorf("server nlink %d", s.Nlink)
	}
	must(t, os.Remove(a))
	if n := lstat(t, b).Nlink; n != 1 {
		t.Errorf("nlink after unlink %d", n)
	}
	wantErrno(t, "link a directory", os.Link(dir, filepath.Join(dir, "dl")), syscall.EPERM)
	wantErrno(t, "link onto existing", os.Link(b, b), syscall.EEXIST)
}

func testSymlink(t *testing.T, f *fixture, dir string) {
	target := filepath.Join(dir, "target")
	must(t, os.Mkdir(target, 0o755))
	l := filepath.Join(dir, "l")
	must(t, os.Symlink("target", l))
	got, err := os.Readlink(l)
	must(t, err)
	if got != "target" {
		t.Errorf("readlink %q", got)
	}
	if st := lstat(t, l); st.Mode&syscall.S_IFMT != syscall.S_IFLNK || st.Size != int64(len("target")) {
		t.Errorf("lstat: mode %o size %d", st.Mode, st.Size)
	}
	fi, err := os.Stat(l)
	must(t, err)
	if !fi.IsDir() {
		t.Errorf("stat through the link: %v", fi.Mode())
	}
	must(t, os.WriteFile(filepath.Join(l, "through"), nil, 0o644))
	if _, err := os.Lstat(filepath.Join(target, "through")); err != nil {
		t.Errorf("created through the link: %v", err)
	}
	long := strings.Repeat("x/", 1500)
	must(t, os.Symlink(long, filepath.Join(dir, "long")))
	if got, _ := os.Readlink(filepath.Join(dir, "long")); got != long {
		t.Errorf("long target read back with %d bytes", len(got))
	}
	dangling := filepath.Join(dir, "dangling")
	must(t, os.Symlink("nowhere", dangling))
	_, err = os.Stat(dangling)
	wantErrno(t, "stat dangling", err, syscall.ENOENT)
}

func testChmod(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, nil, 0o644))
	for _, mode := range []uint32{0o600, 0o4755, 0o1777, 0} {
		must(t, syscall.Chmod(p, mode))
		if st := lstat(t, p); st.Mode != syscall.S_IFREG|mode {
			t.Errorf("chmod %o: mount has %o", mode, st.Mode)
		}
		if a := f.sdkStat(t, p); a.Mode != syscall.S_IFREG|mode {
			t.Errorf("chmod %o: server has %o", mode, a.Mode)
		}
	}
}

func testChown(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, nil, 0o644))
	must(t, os.Chown(p, 1000, 2000))
	if st := lstat(t, p); st.Uid != 1000 || st.Gid != 2000 {
		t.Errorf("mount: %d:%d", st.Uid, st.Gid)
	}
	if a := f.sdkStat(t, p); a.UID != 1000 || a.GID != 2000 {
		t.Errorf("server: %d:%d", a.UID, a.GID)
	}
	must(t, os.Lchown(p, -1, 3000))
	if st := lstat(t, p); st.Uid != 1000 || st.Gid != 3000 {
		t.Errorf("group only: %d:%d", st.Uid, st.Gid)
	}
}

func testUtimes(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, nil, 0o644))
	at := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	mt := time.Date(2011, 12, 13, 14, 15, 16, 123456789, time.UTC)
	must(t, os.Chtimes(p, at, mt))
	st := lstat(t, p)
	if got := time.Unix(st.Atim.Unix()); !got.Equal(at) {
		t.Errorf("atime %v, want %v", got, at)
	}
	if got := time.Unix(st.Mtim.Unix()); !got.Equal(mt) {
		t.Errorf("mtime %v, want %v", got, mt)
	}
	if a := f.sdkStat(t, p); !a.Mtime.Equal(mt) || !a.Atime.Equal(at) {
		t.Errorf("server: atime %v mtime %v", a.Atime, a.Mtime)
	}
	// UTIME_NOW: the server's clock, after the old times.
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_OMIT}}, 0))
	if a := f.sdkStat(t, p); !a.Atime.After(mt) || !a.Mtime.Equal(mt) {
		t.Errorf("after UTIME_NOW/UTIME_OMIT: atime %v mtime %v", a.Atime, a.Mtime)
	}
}

func testXattrs(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, nil, 0o644))
	must(t, unix.Setxattr(p, "user.color", []byte("blue"), 0))
	must(t, unix.Setxattr(p, "user.empty", nil, 0))
	n, err := unix.Getxattr(p, "user.color", nil)
	must(t, err)
	if n != 4 {
		t.Errorf("size probe %d", n)
	}
	buf := make([]byte, 2)
	_, err = unix.Getxattr(p, "user.color", buf)
	wantErrno(t, "small buffer", err, syscall.ERANGE)
	buf = make([]byte, 64)
	n, err = unix.Getxattr(p, "user.color", buf)
	must(t, err)
	if string(buf[:n]) != "blue" {
		t.Errorf("value %q", buf[:n])
	}
	if v, err := f.c.GetXattr(t.Context(), f.rel(p), "user.color"); err != nil || string(v) != "blue" {
		t.Errorf("server: %q %v", v, err)
	}
	n, err = unix.Listxattr(p, buf)
	must(t, err)
	names := strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00")
	sort.Strings(names)
	if !slices.Equal(names, []string{"user.color", "user.empty"}) {
		t.Errorf("list %q", names)
	}
	wantErrno(t, "create existing", unix.Setxattr(p, "user.color", []byte("red"), unix.XATTR_CREATE), syscall.EEXIST)
	wantErrno(t, "replace missing", unix.Setxattr(p, "user.nx", []byte("red"), unix.XATTR_REPLACE), syscall.ENODATA)
	must(t, unix.Setxattr(p, "user.color", []byte("red"), unix.XATTR_REPLACE))
	must(t, unix.Removexattr(p, "user.color"))
	_, err = unix.Getxattr(p, "user.color", buf)
	wantErrno(t, "removed", err, syscall.ENODATA)
	wantErrno(t, "remove missing", unix.Removexattr(p, "user.color"), syscall.ENODATA)
	// On a directory and, without following, a symlink's own.
	must(t, unix.Setxattr(dir, "user.d", []byte("1"), 0))
	if n, err := unix.Getxattr(dir, "user.d", buf); err != nil || string(buf[:n]) != "1" {
		t.Errorf("directory xattr %q %v", buf[:n], err)
	}
}

func testStatfs(t *testing.T, f *fixture, dir string) {
	var st unix.Statfs_t
	must(t, unix.Statfs(dir, &st))
	s, err := f.c.Statfs(t.Context(), "/")
	must(t, err)
	if st.Namelen != 255 || uint32(st.Bsize) != s.BlockSize {
		t.Errorf("namelen %d bsize %d, server block size %d", st.Namelen, st.Bsize, s.BlockSize)
	}
	if st.Files != s.TotalInodes || st.Files-st.Ffree != s.UsedInodes {
		t.Errorf("files %d free %d; server total %d used %d", st.Files, st.Ffree, s.TotalInodes, s.UsedInodes)
	}
	must(t, os.WriteFile(filepath.Join(dir, "one-more"), nil, 0o644))
	var after unix.Statfs_t
	must(t, unix.Statfs(dir, &after))
	if after.Ffree != st.Ffree-1 {
		t.Errorf("free inodes %d after a create, before %d", after.Ffree, st.Ffree)
	}
	if st.Type != 0x65735546 { // FUSE_SUPER_MAGIC
		t.Errorf("type %#x", st.Type)
	}
}

func testLongNames(t *testing.T, f *fixture, dir string) {
	n255 := strings.Repeat("n", 255)
	must(t, os.WriteFile(filepath.Join(dir, n255), nil, 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "d"+n255[1:]), 0o755))
	ents, err := os.ReadDir(dir)
	must(t, err)
	if len(ents) != 2 || ents[1].Name() != n255 {
		t.Errorf("listing: %d entries", len(ents))
	}
	n256 := strings.Repeat("m", 256)
	wantErrno(t, "create 256", os.WriteFile(filepath.Join(dir, n256), nil, 0o644), syscall.ENAMETOOLONG)
	wantErrno(t, "mkdir 256", os.Mkdir(filepath.Join(dir, n256), 0o755), syscall.ENAMETOOLONG)
	_, err = os.Lstat(filepath.Join(dir, n256))
	wantErrno(t, "stat 256", err, syscall.ENAMETOOLONG)
	wantErrno(t, "rename to 256", os.Rename(filepath.Join(dir, n255), filepath.Join(dir, n256)), syscall.ENAMETOOLONG)
	wantErrno(t, "symlink 256", os.Symlink("x", filepath.Join(dir, n256)), syscall.ENAMETOOLONG)
	// A deep path near PATH_MAX, built with relative steps.
	deep := dir
	for len(deep) < 3900 {
		deep = filepath.Join(deep, strings.Repeat("p", 200))
		must(t, os.Mkdir(deep, 0o755))
	}
	if _, err := f.c.Lstat(t.Context(), f.rel(deep)); err != nil {
		t.Errorf("server: deep path: %v", err)
	}
}

func testWrongTypes(t *testing.T, f *fixture, dir string) {
	p, d := filepath.Join(dir, "f"), filepath.Join(dir, "d")
	must(t, os.WriteFile(p, nil, 0o644))
	must(t, os.Mkdir(d, 0o755))
	wantErrno(t, "unlink dir", syscall.Unlink(d), syscall.EISDIR)
	wantErrno(t, "rmdir file", syscall.Rmdir(p), syscall.ENOTDIR)
	_, err := os.Lstat(filepath.Join(p, "x"))
	wantErrno(t, "lookup in file", err, syscall.ENOTDIR)
	wantErrno(t, "rename dir over file", os.Rename(d, p), syscall.ENOTDIR)
	wantErrno(t, "rename file over dir", syscall.Rename(p, d), syscall.EISDIR)
}

func testReaddirPages(t *testing.T, f *fixture, dir string) {
	const n = 2500 // more than two of the server's pages
	var want []string
	for i := range n {
		name := strings.Repeat("e", i%40) + "-" + itoa(i)
		want = append(want, name)
		must(t, unix.Mknod(filepath.Join(dir, name), syscall.S_IFREG|0o644, 0))
	}
	sort.Strings(want)
	ents, err := os.ReadDir(dir)
	must(t, err)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
		if e.Type() != 0 {
			t.Fatalf("%s: type %v", e.Name(), e.Type())
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d entries, want %d", len(got), len(want))
	}
	out := run(t, dir, "ls", "-la")
	if lines := strings.Count(out, "\n"); lines != n+3 { // total, ., ..
		t.Errorf("ls -la printed %d lines, want %d", lines, n+3)
	}
}

func itoa(i int) string { return fmt.Sprintf("%05d", i) }

// testReaddirSeek reads a directory with getdents, then seeks back to
// offsets it handed out (in the first page and in a later one) and checks
// the listing continues from the same entries.
func testReaddirSeek(t *testing.T, f *fixture, dir string) {
	const n = 2100
	for i := range n {
		must(t, unix.Mknod(filepath.Join(dir, "s"+itoa(i)), syscall.S_IFREG|0o644, 0))
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	defer unix.Close(fd)
	type ent struct {
		name string
		off  int64
	}
	readAll := func() []ent {
		var out []ent
		buf := make([]byte, 8192)
		for {
			nb, err := unix.Getdents(fd, buf)
			must(t, err)
			if nb == 0 {
				return out
			}
			for b := buf[:nb]; len(b) > 0; {
				reclen := int(uint16(b[16]) | uint16(b[17])<<8)
				off := int64(0)
				for i := 7; i >= 0; i-- {
					off = off<<8 | int64(b[8+i])
				}
				name := string(b[19:reclen])
				name = name[:strings.IndexByte(name, 0)]
				out = append(out, ent{name, off})
				b = b[reclen:]
			}
		}
	}
	all := readAll()
	if len(all) != n+2 {
		t.Fatalf("getdents: %d entries, want %d", len(all), n+2)
	}
	for _, k := range []int{1, 10, 1500, n} {
		if _, err := unix.Seek(fd, all[k].off, 0); err != nil {
			t.Fatal(err)
		}
		rest := readAll()
		if len(rest) != len(all)-k-1 || (len(rest) > 0 && rest[0].name != all[k+1].name) {
			t.Errorf("after seeking past entry %d: %d entries", k, len(rest))
		}
	}
}

// buildTree makes a small tree of empty files, directories and symlinks
// with os calls and returns its paths, relative, sorted.
func buildTree(t *testing.T, root string) []string {
	var paths []string
	for _, d := range []string{"a", "a/b", "a/b/c", "d", "e e"} {
		must(t, os.Mkdir(filepath.Join(root, d), 0o755))
		paths = append(paths, d)
	}
	for _, p := range []string{"a/f1", "a/b/f2", "a/b/c/f3", "d/f4", "e e/f 5", "top"} {
		must(t, os.WriteFile(filepath.Join(root, p), nil, 0o640))
		paths = append(paths, p)
	}
	must(t, os.Symlink("b/f2", filepath.Join(root, "a/l")))
	must(t, syscall.Chmod(filepath.Join(root, "d"), 0o700))
	must(t, os.Chtimes(filepath.Join(root, "a/f1"), time.Unix(1e9, 0), time.Unix(1e9, 5000)))
	paths = append(paths, "a/l")
	sort.Strings(paths)
	return paths
}

func testLsFind(t *testing.T, f *fixture, dir string) {
	want := buildTree(t, dir)
	out := run(t, dir, "find", ".", "-mindepth", "1")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		got = append(got, strings.TrimPrefix(l, "./"))
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("find:\n%q\nwant\n%q", got, want)
	}
	out = run(t, dir, "find", ".", "-type", "l")
	if strings.TrimSpace(out) != "./a/l" {
		t.Errorf("find -type l: %q", out)
	}
	out = run(t, dir, "ls", "-la", "a")
	for _, s := range []string{"b", "f1", "l -> b/f2", "-rw-r-----"} {
		if !strings.Contains(out, s) {
			t.Errorf("ls -la a: no %q in\n%s", s, out)
		}
	}
}

func testCopyTreeEmpty(t *testing.T, f *fixture, dir string) {
	src := t.TempDir()
	buildTree(t, src)
	dst := filepath.Join(dir, "copy")
	run(t, dir, "cp", "-a", src, dst)
	run(t, dir, "diff", "-r", "--no-dereference", src, dst)
	for _, p := range []string{"a/f1", "d", "a/l"} {
		s, d := lstat(t, filepath.Join(src, p)), lstat(t, filepath.Join(dst, p))
		if s.Mode != d.Mode || s.Mtim != d.Mtim {
			t.Errorf("%s: copy has mode %o mtime %v, source %o %v", p, d.Mode, d.Mtim, s.Mode, s.Mtim)
		}
	}
	// tar out of the mount and back into it.
	tarball := filepath.Join(t.TempDir(), "t.tar")
	run(t, dst, "tar", "-cf", tarball, ".")
	back := filepath.Join(dir, "untar")
	must(t, os.Mkdir(back, 0o755))
	run(t, back, "tar", "-xpf", tarball)
	run(t, dir, "diff", "-r", "--no-dereference", src, back)
	if s, d := lstat(t, filepath.Join(src, "a/f1")), lstat(t, filepath.Join(back, "a/f1")); s.Mtim.Sec != d.Mtim.Sec {
		t.Errorf("tar kept mtime %v, source %v", d.Mtim, s.Mtim)
	}
}

func testAccess(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, nil, 0o644))
	must(t, unix.Access(p, unix.R_OK|unix.W_OK))
	wantErrno(t, "root executing a file nobody may", unix.Access(p, unix.X_OK), syscall.EACCES)
	must(t, syscall.Chmod(p, 0o744))
	must(t, unix.Access(p, unix.X_OK))
	wantErrno(t, "missing", unix.Access(filepath.Join(dir, "nx"), unix.F_OK), syscall.ENOENT)
}

// testRmRf removes a tree with rm -rf, which lists directories while it
// unlinks their entries: nothing may be skipped.
func testRmRf(t *testing.T, f *fixture, dir string) {
	top := filepath.Join(dir, "top")
	for _, sub := range []string{"a", "b", "a/c"} {
		must(t, os.MkdirAll(filepath.Join(top, sub), 0o755))
		for i := range 1100 {
			must(t, unix.Mknod(filepath.Join(top, sub, itoa(i)), syscall.S_IFREG|0o644, 0))
		}
	}
	run(t, dir, "rm", "-rf", "top")
	if _, err := f.c.Lstat(t.Context(), f.rel(top)); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("server still has the tree: %v", err)
	}
}
