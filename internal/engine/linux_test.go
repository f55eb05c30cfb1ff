package engine

// Targeted checks of the engine against Linux's behaviour, one per rule.
// Each case states what Linux does and where in the kernel that comes from.
// They were also run as system calls on Linux 6.18
// (tmpfs and ext4) to confirm the expected errors and modes.

import (
	"strings"
	"syscall"
	"testing"
)

// vfsFixture is a small engine with helpers that fail the test on setup
// errors.
type vfsFixture struct {
	t   *testing.T
	e   *Engine
	now int64
}

func newVFSFixture(t *testing.T) *vfsFixture {
	t.Helper()
	f := &vfsFixture{t: t, e: New(0, 1), now: 1}
	f.setattr(credRoot, "/", SetAttr{Valid: SetMode, Mode: 0o777})
	return f
}

func (f *vfsFixture) tick() int64 { f.now++; return f.now }

func (f *vfsFixture) mkdir(c Cred, path string, mode uint32) Attr {
	f.t.Helper()
	a, err := pathMkdir(f.e, c, path, mode, f.tick())
	if err != nil {
		f.t.Fatalf("setup: mkdir %s: %v", path, err)
	}
	return a
}

func (f *vfsFixture) mknod(c Cred, path string, mode uint32) Attr {
	f.t.Helper()
	a, err := pathMknod(f.e, c, path, mode, 0, f.tick())
	if err != nil {
		f.t.Fatalf("setup: mknod %s: %v", path, err)
	}
	return a
}

func (f *vfsFixture) symlink(c Cred, target, path string) Attr {
	f.t.Helper()
	a, err := pathSymlink(f.e, c, target, path, f.tick())
	if err != nil {
		f.t.Fatalf("setup: symlink %s: %v", path, err)
	}
	return a
}

func (f *vfsFixture) setattr(c Cred, path string, s SetAttr) Attr {
	f.t.Helper()
	a, err := pathSetAttr(f.e, c, path, true, s, f.tick())
	if err != nil {
		f.t.Fatalf("setup: setattr %s: %v", path, err)
	}
	return a
}

func (f *vfsFixture) stat(path string) Attr {
	f.t.Helper()
	a, err := f.e.Resolve(credRoot, path, false)
	if err != nil {
		f.t.Fatalf("stat %s: %v", path, err)
	}
	return a
}

func (f *vfsFixture) ino(path string) Ino { f.t.Helper(); return f.stat(path).Ino }

func wantErr(t *testing.T, what string, got error, want syscall.Errno) {
	t.Helper()
	if errName(got) != errName(want) {
		t.Errorf("%s: got %s, Linux gives %s", what, errName(got), errName(want))
	}
}

func wantOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: got %s, Linux succeeds", what, errName(err))
	}
}

// mkdir(2) NOTES: "Under Linux, apart from the permission bits, the
// S_ISVTX mode bit is also honored" — vfs_mkdir masks the mode with
// S_IRWXUGO|S_ISVTX, so set-user-id and set-group-id are dropped (the
// set-group-id bit then comes back only from a set-group-id parent).
func TestVFSMkdirIgnoresSetIDBits(t *testing.T) {
	f := newVFSFixture(t)
	for _, tc := range []struct {
		mode, want uint32
	}{{0o2755, 0o755}, {0o4755, 0o755}, {0o7777, 0o1777}} {
		a, err := pathMkdir(f.e, credRoot, "/d"+modeString(tc.mode), tc.mode, f.tick())
		if err != nil {
			t.Fatal(err)
		}
		if a.Mode != S_IFDIR|tc.want {
			t.Errorf("mkdir mode %#o: got %s, Linux gives %s", tc.mode, modeString(a.Mode), modeString(S_IFDIR|tc.want))
		}
	}
}

// may_mknod runs before the path is looked up: S_IFDIR is EPERM (not
// EINVAL). The CAP_MKNOD check for devices is in vfs_mknod, after the new
// name's checks (EEXIST, EACCES).
func TestVFSMknodTypeChecks(t *testing.T) {
	f := newVFSFixture(t)
	f.mknod(credRoot, "/f", 0o644)
	f.mkdir(credRoot, "/ro", 0o755)
	_, err := pathMknod(f.e, credRoot, "/x", S_IFDIR|0o755, 0, f.tick())
	wantErr(t, "mknod S_IFDIR as root", err, syscall.EPERM)
	_, err = pathMknod(f.e, credU1, "/f", S_IFCHR|0o644, 0x103, f.tick())
	wantErr(t, "mknod chardev over an existing name as non-root", err, syscall.EEXIST)
	_, err = pathMknod(f.e, credU1, "/ro/c", S_IFBLK|0o644, 0x103, f.tick())
	wantErr(t, "mknod blockdev in an unwritable directory as non-root", err, syscall.EACCES)
}

// vfs_link refuses a directory (EPERM) only after filename_create and
// may_create have checked the new name.
func TestVFSLinkDirectoryErrorOrder(t *testing.T) {
	f := newVFSFixture(t)
	d := f.mkdir(credRoot, "/d", 0o755)
	f.mknod(credRoot, "/f", 0o644)
	_, err := f.e.Link(credRoot, d.Ino, f.e.Root(), "f", f.tick())
	wantErr(t, "link a directory over an existing name", err, syscall.EEXIST)
	_, err = f.e.Link(credRoot, d.Ino, f.e.Root(), ".", f.tick())
	wantErr(t, "link a directory to \".\"", err, syscall.EEXIST)
}

// NAME_MAX is enforced by the file system's lookup of the component, so a
// component that is too long is reported only when the walk reaches it:
// after search permission on its directory, and after errors earlier in
// the path. (stat("/missing/<256 bytes>") is ENOENT, stat("/file/<256>") is
// ENOTDIR, mkdir("/unsearchable/<256>") is EACCES.)
func TestVFSNameTooLongIsFoundByTheWalk(t *testing.T) {
	f := newVFSFixture(t)
	long := strings.Repeat("x", 256)
	f.mknod(credRoot, "/file", 0o644)
	nx := f.mkdir(credRoot, "/nx", 0o666)

	_, err := f.e.Resolve(credRoot, "/missing/"+long, true)
	wantErr(t, "resolve /missing/<256>", err, syscall.ENOENT)
	_, err = f.e.Resolve(credRoot, "/file/"+long, true)
	wantErr(t, "resolve /file/<256>", err, syscall.ENOTDIR)
	_, err = f.e.Resolve(credU1, "/nx/"+long, true)
	wantErr(t, "resolve /nx/<256> without search permission", err, syscall.EACCES)
	_, err = pathMkdir(f.e, credU1, "/missing/"+long, 0o755, f.tick())
	wantErr(t, "mkdir /missing/<256>", err, syscall.ENOENT)
	_, err = pathMkdir(f.e, credU1, "/nx/"+long, 0o755, f.tick())
	wantErr(t, "mkdir /nx/<256> without search permission", err, syscall.EACCES)

	// The inode-level calls: search permission comes first.
	_, err = f.e.Mkdir(credU1, nx.Ino, long, 0o755, f.tick())
	wantErr(t, "Mkdir(nx, <256>) without search permission", err, syscall.EACCES)
	_, err = f.e.Lookup(credU1, nx.Ino, long)
	wantErr(t, "Lookup(nx, <256>) without search permission", err, syscall.EACCES)
	err = f.e.Unlink(credU1, nx.Ino, long, f.tick())
	wantErr(t, "Unlink(nx, <256>) without search permission", err, syscall.EACCES)

	// Rename looks the source up before it looks at the target's name.
	err = f.e.Rename(credRoot, f.e.Root(), "missing", f.e.Root(), long, 0, f.tick())
	wantErr(t, "rename missing -> <256>", err, syscall.ENOENT)
}

// A too-long component inside a symlink's target is ENAMETOOLONG too, not
// ENOENT.
func TestVFSNameTooLongInSymlinkTarget(t *testing.T) {
	f := newVFSFixture(t)
	f.mkdir(credRoot, "/d", 0o755)
	f.symlink(credRoot, strings.Repeat("o", 256), "/l1")
	f.symlink(credRoot, "d/"+strings.Repeat("o", 256)+"/x", "/l2")
	_, err := f.e.Resolve(credRoot, "/l1", true)
	wantErr(t, "stat symlink -> <256>", err, syscall.ENAMETOOLONG)
	_, err = f.e.Resolve(credRoot, "/l2", true)
	wantErr(t, "stat symlink -> d/<256>/x", err, syscall.ENAMETOOLONG)
	_, err = pathMkdir(f.e, credRoot, "/l1/x", 0o755, f.tick())
	wantErr(t, "mkdir through symlink -> <256>", err, syscall.ENAMETOOLONG)
}

// PATH_MAX (4096) includes the terminating NUL: getname() refuses a path
// of 4096 bytes, and so symlink() a target of 4096 bytes.
func TestVFSPathLimitCountsTheNUL(t *testing.T) {
	f := newVFSFixture(t)
	_, err := f.e.Resolve(credRoot, strings.Repeat("/", 4095), true)
	wantOK(t, "resolve a 4095-byte path", err)
	_, err = f.e.Resolve(credRoot, strings.Repeat("/", 4096), true)
	wantErr(t, "resolve a 4096-byte path", err, syscall.ENAMETOOLONG)
	_, _, err = f.e.ResolveParent(credRoot, strings.Repeat("/", 4096))
	wantErr(t, "resolve the parent of a 4096-byte path", err, syscall.ENAMETOOLONG)
	_, err = f.e.Symlink(credRoot, f.e.Root(), "s4095", strings.Repeat("a", 4095), f.tick())
	wantOK(t, "symlink with a 4095-byte target", err)
	_, err = f.e.Symlink(credRoot, f.e.Root(), "s4096", strings.Repeat("a", 4096), f.tick())
	wantErr(t, "symlink with a 4096-byte target", err, syscall.ENAMETOOLONG)
}

// unlink("dir/.") and rmdir("dir/.") resolve dir's "." first, which needs
// search permission on dir: EACCES before EISDIR / EINVAL / ENOTEMPTY.
func TestVFSDotRemovalNeedsSearchPermission(t *testing.T) {
	f := newVFSFixture(t)
	nx := f.mkdir(credRoot, "/nx", 0o666)
	wantErr(t, "Unlink(nx, \".\") without search permission", f.e.Unlink(credU1, nx.Ino, ".", f.tick()), syscall.EACCES)
	wantErr(t, "Rmdir(nx, \".\") without search permission", f.e.Rmdir(credU1, nx.Ino, ".", f.tick()), syscall.EACCES)
	wantErr(t, "Rmdir(nx, \"..\") without search permission", f.e.Rmdir(credU1, nx.Ino, "..", f.tick()), syscall.EACCES)
}

// do_renameat2 rejects a "." or ".." source with EBUSY before it looks at
// the target; only a "." or ".." target gives EEXIST under
// RENAME_NOREPLACE.
func TestVFSRenameDotSourceIsEBUSY(t *testing.T) {
	f := newVFSFixture(t)
	d := f.mkdir(credRoot, "/d", 0o755)
	err := f.e.Rename(credRoot, d.Ino, ".", d.Ino, "..", RenameNoReplace, f.tick())
	wantErr(t, "rename(d/., d/.., RENAME_NOREPLACE)", err, syscall.EBUSY)
	err = f.e.Rename(credRoot, d.Ino, "..", f.e.Root(), ".", RenameNoReplace, f.tick())
	wantErr(t, "rename(d/.., /., RENAME_NOREPLACE)", err, syscall.EBUSY)
}

// A directory may hold more than MaxLinks subdirectories, as on ext4 (with
// dir_nlink) and tmpfs: MaxLinks limits hard links to files only, since a
// namespace that serves Hadoop-style workloads has directories with
// millions of entries. Both mkdir and rename into such a directory work,
// and its link count keeps counting.
func TestDirectoryLinkCountHasNoLimit(t *testing.T) {
	f := newVFSFixture(t)
	full := f.mkdir(credRoot, "/full", 0o755)
	for i := 0; full.Nlink < MaxLinks; i++ {
		if _, err := f.e.Mkdir(credRoot, full.Ino, "d"+decimalString(i), 0o755, f.tick()); err != nil {
			t.Fatalf("filling: %v", err)
		}
		full, _ = f.e.GetAttr(full.Ino)
	}
	_, err := f.e.Mkdir(credRoot, full.Ino, "one-more", 0o755, f.tick())
	wantOK(t, "mkdir in a directory with MaxLinks links", err)
	f.mkdir(credRoot, "/other", 0o755)
	err = pathRename(f.e, credRoot, "/other", "/full/other", 0, f.tick())
	wantOK(t, "rename a directory into a directory with MaxLinks links", err)
	if a, _ := f.e.GetAttr(full.Ino); a.Nlink != MaxLinks+2 {
		t.Errorf("directory nlink %d, want %d", a.Nlink, MaxLinks+2)
	}
	if err := f.e.Check(); err != nil {
		t.Fatal(err)
	}
}

func decimalString(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// setattr_prepare's chown_ok and chgrp_ok: a caller without CAP_CHOWN may
// only "change" the owner to itself when it already owns the node, and the
// group only when it owns the node — even to the values they already have.
func TestVFSChownByNonOwnerToSameIDs(t *testing.T) {
	f := newVFSFixture(t)
	a := f.mknod(credRoot, "/f", 0o4777)
	f.setattr(credRoot, "/f", SetAttr{Valid: SetUID | SetGID, UID: 1001, GID: 1001})
	_, err := f.e.SetAttr(credU1, a.Ino, SetAttr{Valid: SetUID, UID: 1001}, f.tick())
	wantErr(t, "chown(f, its own uid, -1) by a non-owner", err, syscall.EPERM)
	_, err = f.e.SetAttr(credU1, a.Ino, SetAttr{Valid: SetGID, GID: 1001}, f.tick())
	wantErr(t, "chown(f, -1, its own gid) by a non-owner", err, syscall.EPERM)
}

// utimensat: only times == NULL or {UTIME_NOW, UTIME_NOW} is a "touch"
// that write permission allows; {UTIME_NOW, UTIME_OMIT} and {UTIME_OMIT,
// UTIME_NOW} set ATTR_TIMES_SET and need ownership (EPERM).
func TestVFSSetOneTimeToNowNeedsOwnership(t *testing.T) {
	f := newVFSFixture(t)
	a := f.mknod(credRoot, "/f", 0o666)
	_, err := f.e.SetAttr(credU1, a.Ino, SetAttr{Valid: SetAtimeNow | SetMtimeNow}, f.tick())
	wantOK(t, "touch (both now) by a non-owner with write permission", err)
	_, err = f.e.SetAttr(credU1, a.Ino, SetAttr{Valid: SetAtimeNow}, f.tick())
	wantErr(t, "atime=now alone by a non-owner with write permission", err, syscall.EPERM)
	_, err = f.e.SetAttr(credU1, a.Ino, SetAttr{Valid: SetMtimeNow}, f.tick())
	wantErr(t, "mtime=now alone by a non-owner with write permission", err, syscall.EPERM)
}

// notify_change refuses to change a symlink's mode (EOPNOTSUPP, Linux
// 6.6, "attr: block mode changes of symlinks"), even for root.
func TestVFSSymlinkModeCannotChange(t *testing.T) {
	f := newVFSFixture(t)
	l := f.symlink(credRoot, "x", "/l")
	_, err := f.e.SetAttr(credRoot, l.Ino, SetAttr{Valid: SetMode, Mode: 0o700}, f.tick())
	wantErr(t, "chmod of a symlink itself", err, syscall.EOPNOTSUPP)
	if got := f.stat("/l"); got.Mode != S_IFLNK|0o777 {
		t.Errorf("symlink mode became %s", modeString(got.Mode))
	}
	_, err = f.e.SetAttr(credRoot, l.Ino, SetAttr{Valid: SetUID | SetGID, UID: 5, GID: 5}, f.tick())
	wantOK(t, "lchown of a symlink", err)
}

// setattr_should_drop_sgid (Linux 6.2 and later): chown and truncate by a
// caller without CAP_FSETID clear set-group-id also when the group may not
// execute, if the caller is not in the file's group.
func TestVFSKillSGIDWhenNotInGroup(t *testing.T) {
	f := newVFSFixture(t)
	a := f.mknod(credRoot, "/f", 0o644)
	f.setattr(credRoot, "/f", SetAttr{Valid: SetUID | SetGID, UID: 1000, GID: 3000})
	f.setattr(credRoot, "/f", SetAttr{Valid: SetMode, Mode: 0o2746})
	got, err := f.e.SetAttr(credU1, a.Ino, SetAttr{Valid: SetGID, GID: 2000}, f.tick())
	wantOK(t, "chgrp by the owner to one of its groups", err)
	if got.Mode != S_IFREG|0o746 {
		t.Errorf("chgrp by an owner outside the old group: mode %s, Linux gives %s", modeString(got.Mode), modeString(S_IFREG|0o746))
	}

	b := f.mknod(credRoot, "/g", 0o644)
	f.setattr(credRoot, "/g", SetAttr{Valid: SetGID, GID: 3000})
	f.setattr(credRoot, "/g", SetAttr{Valid: SetMode, Mode: 0o6746})
	got, err = f.e.SetAttr(credU1, b.Ino, SetAttr{Valid: SetSize, Size: 7}, f.tick())
	wantOK(t, "truncate with write permission", err)
	if got.Mode != S_IFREG|0o746 {
		t.Errorf("truncate by a caller outside the group: mode %s, Linux gives %s", modeString(got.Mode), modeString(S_IFREG|0o746))
	}
}

// setxattr(2): XATTR_CREATE|XATTR_REPLACE together is not EINVAL; the
// file system applies both (EEXIST if the attribute exists, ENODATA if not).
func TestVFSXattrCreateAndReplaceTogether(t *testing.T) {
	f := newVFSFixture(t)
	a := f.mknod(credRoot, "/f", 0o644)
	err := f.e.SetXattr(credRoot, a.Ino, "user.k", []byte("v"), XattrCreate|XattrReplace, f.tick())
	wantErr(t, "setxattr(CREATE|REPLACE) of a missing attribute", err, syscall.ENODATA)
	if err := f.e.SetXattr(credRoot, a.Ino, "user.k", []byte("v"), 0, f.tick()); err != nil {
		t.Fatal(err)
	}
	err = f.e.SetXattr(credRoot, a.Ino, "user.k", []byte("w"), XattrCreate|XattrReplace, f.tick())
	wantErr(t, "setxattr(CREATE|REPLACE) of an existing attribute", err, syscall.EEXIST)
	err = f.e.SetXattr(credRoot, a.Ino, "user.k", []byte("w"), 4, f.tick())
	wantErr(t, "setxattr with an unknown flag", err, syscall.EINVAL)
}

// cap_inode_setxattr / cap_inode_removexattr: security.* attributes (other
// than security.capability) need CAP_SYS_ADMIN to write, whoever owns the
// file; anyone may read them.
func TestVFSSecurityXattrNeedsRootToWrite(t *testing.T) {
	f := newVFSFixture(t)
	a := f.mknod(credU1, "/f", 0o600)
	err := f.e.SetXattr(credU1, a.Ino, "security.x", []byte("v"), 0, f.tick())
	wantErr(t, "setxattr security.x by the owner", err, syscall.EPERM)
	if err := f.e.SetXattr(credRoot, a.Ino, "security.x", []byte("v"), 0, f.tick()); err != nil {
		t.Fatal(err)
	}
	v, err := f.e.GetXattr(credU2, a.Ino, "security.x")
	if err != nil || string(v) != "v" {
		t.Errorf("getxattr security.x by another user: %q, %s; Linux allows it", v, errName(err))
	}
	err = f.e.RemoveXattr(credU1, a.Ino, "security.x", f.tick())
	wantErr(t, "removexattr security.x by the owner", err, syscall.EPERM)
}

// xattr_permission runs before the namespace is resolved: an attribute in
// no known namespace on a file the caller may not read is EACCES, and a
// bare namespace prefix ("user.", "trusted.") is EINVAL, not EOPNOTSUPP.
func TestVFSXattrNamespaceErrors(t *testing.T) {
	f := newVFSFixture(t)
	a := f.mknod(credRoot, "/f", 0o600)
	_, err := f.e.GetXattr(credU1, a.Ino, "foo.bar")
	wantErr(t, "getxattr foo.bar on an unreadable file", err, syscall.EACCES)
	_, err = f.e.GetXattr(credRoot, a.Ino, "foo.bar")
	wantErr(t, "getxattr foo.bar", err, syscall.EOPNOTSUPP)
	_, err = f.e.GetXattr(credRoot, a.Ino, "user.")
	wantErr(t, "getxattr \"user.\"", err, syscall.EINVAL)
	err = f.e.SetXattr(credRoot, a.Ino, "trusted.", []byte("v"), 0, f.tick())
	wantErr(t, "setxattr \"trusted.\"", err, syscall.EINVAL)
	err = f.e.SetXattr(credU1, a.Ino, "user", []byte("v"), 0, f.tick())
	wantErr(t, "setxattr \"user\" on an unwritable file", err, syscall.EACCES)
}
