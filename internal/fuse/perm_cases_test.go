package fuse

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The permission cases run callers as other uids (asCaller) on the
// suite's mount, which has the default options and allow_other. Each is a
// place where a conformance suite found the mount differing from Linux.

// Callers other than root, in the suite's permission cases.
const (
	otherUID, otherGID = 1000, 1000
	thirdUID           = 1001
	sharedGID          = 2000 // a supplementary group of otherUID where a case gives it
)

func permCases() []posixCase {
	return []posixCase{
		{"setid_cleared_by_write", testSetIDClearedByWrite},
		{"setid_cleared_by_truncate", testSetIDClearedByTruncate},
		{"ftruncate_after_open", testFtruncateAfterOpen},
		{"special_file_modes", testSpecialFileModes},
		{"search_permission_revoked", testSearchRevoked},
	}
}

// openDir makes dir writable by everyone, as the cases' callers need.
func openDir(t *testing.T, dir string) {
	t.Helper()
	must(t, syscall.Chmod(dir, 0o777))
}

// rootFile creates p as root with exactly mode (set-id bits included)
// and some contents.
func rootFile(t *testing.T, p string, mode uint32) {
	t.Helper()
	must(t, os.WriteFile(p, []byte("contents"), 0o600))
	must(t, syscall.Chmod(p, mode))
}

// writeAs opens p for writing as uid/gid/groups, writes a byte, stats
// the file (so the kernel holds its attributes from before the write's
// commit) and closes.
func writeAs(f *fixture, uid, gid uint32, groups []uint32, p string) error {
	return f.asCaller(uid, gid, groups, func() error {
		fd, err := unix.Open(p, unix.O_WRONLY, 0)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if _, err := unix.Pwrite(fd, []byte("x"), 0); err != nil {
			unix.Close(fd)
			return err
		}
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return err
		}
		return unix.Close(fd)
	})
}

// wantMode checks p's permission bits through the mount (what the
// kernel has, as stat shows it) and on the server.
func wantMode(t *testing.T, f *fixture, what, p string, perm uint32) {
	t.Helper()
	if st := lstat(t, p); st.Mode&0o7777 != perm {
		t.Errorf("%s: mount shows mode %o, want %o", what, st.Mode&0o7777, perm)
	}
	if a := f.sdkStat(t, p); a.Mode&0o7777 != perm {
		t.Errorf("%s: server has mode %o, want %o", what, a.Mode&0o7777, perm)
	}
}

// A write by anyone but root clears set-user-ID, and set-group-ID where it
// means "run with the group" (group execute set) or the writer is not in
// the file's group; root's writes leave them (Linux's file_remove_privs
// with CAP_FSETID). The mode is right at once through the mount, not
// after the attribute timeout.
func testSetIDClearedByWrite(t *testing.T, f *fixture, dir string) {
	openDir(t, dir)
	suid := filepath.Join(dir, "suid")
	rootFile(t, suid, 0o6777)
	if err := writeAs(f, otherUID, otherGID, nil, suid); err != nil {
		t.Fatalf("write by another user: %v", err)
	}
	wantMode(t, f, "06777 after another user's write", suid, 0o777)

	sgidNoExec := filepath.Join(dir, "sgid-noexec")
	rootFile(t, sgidNoExec, 0o2666)
	must(t, writeAs(f, otherUID, otherGID, nil, sgidNoExec))
	wantMode(t, f, "02666 after a write by a user outside the group", sgidNoExec, 0o666)

	inGroup := filepath.Join(dir, "sgid-ingroup")
	rootFile(t, inGroup, 0o2666)
	must(t, os.Chown(inGroup, 0, sharedGID))
	must(t, syscall.Chmod(inGroup, 0o2666))
	must(t, writeAs(f, otherUID, otherGID, []uint32{sharedGID}, inGroup))
	wantMode(t, f, "02666 after a write by a member of the group", inGroup, 0o2666)

	byRoot := filepath.Join(dir, "by-root")
	rootFile(t, byRoot, 0o6777)
	must(t, writeAs(f, 0, 0, nil, byRoot))
	wantMode(t, f, "06777 after root's write", byRoot, 0o6777)

	// The write landed, and its commit is what cleared the bits.
	if data, err := os.ReadFile(suid); err != nil || string(data) != "xontents" {
		t.Errorf("contents after the write: %q %v", data, err)
	}
}

// A truncate by another user with write permission succeeds and clears
// the set-id bits, by path, through a descriptor and by O_TRUNC.
func testSetIDClearedByTruncate(t *testing.T, f *fixture, dir string) {
	openDir(t, dir)
	byPath, byFd, byOpen := filepath.Join(dir, "path"), filepath.Join(dir, "fd"), filepath.Join(dir, "open")
	for _, p := range []string{byPath, byFd, byOpen} {
		rootFile(t, p, 0o6777)
	}
	err := f.asCaller(otherUID, otherGID, nil, func() error { return unix.Truncate(byPath, 3) })
	if err != nil {
		t.Errorf("truncate(2) of a 06777 file by another user: %v", err)
	}
	wantMode(t, f, "after truncate(2)", byPath, 0o777)
	if a := f.sdkStat(t, byPath); a.Size != 3 {
		t.Errorf("size after truncate(2): %d", a.Size)
	}

	err = f.asCaller(otherUID, otherGID, nil, func() error {
		fd, err := unix.Open(byFd, unix.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Ftruncate(fd, 2)
	})
	if err != nil {
		t.Errorf("ftruncate(2) of a 06777 file by another user: %v", err)
	}
	wantMode(t, f, "after ftruncate(2)", byFd, 0o777)

	err = f.asCaller(otherUID, otherGID, nil, func() error {
		fd, err := unix.Open(byOpen, unix.O_WRONLY|unix.O_TRUNC, 0)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	})
	if err != nil {
		t.Errorf("open(O_TRUNC) of a 06777 file by another user: %v", err)
	}
	wantMode(t, f, "after open(O_TRUNC)", byOpen, 0o777)
	if a := f.sdkStat(t, byOpen); a.Size != 0 {
		t.Errorf("size after open(O_TRUNC): %d", a.Size)
	}
}

// ftruncate needs a descriptor open for writing, not write permission
// now: a file created with mode 0, or whose mode its owner set to 0 after
// opening it, can be truncated (and written) through the descriptor,
// though not by path.
func testFtruncateAfterOpen(t *testing.T, f *fixture, dir string) {
	openDir(t, dir)
	created, chmodded := filepath.Join(dir, "created"), filepath.Join(dir, "chmodded")
	err := f.asCaller(otherUID, otherGID, nil, func() error {
		fd, err := unix.Open(created, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Ftruncate(fd, 100); err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if st.Size != 100 || st.Mode&0o7777 != 0 {
			t.Errorf("after ftruncate of a mode 0 file: size %d mode %o", st.Size, st.Mode&0o7777)
		}
		_, err = unix.Pwrite(fd, []byte("abc"), 0)
		return err
	})
	if err != nil {
		t.Errorf("create with mode 0, then ftruncate: %v", err)
	}
	if a := f.sdkStat(t, created); a.Size != 100 || a.UID != otherUID {
		t.Errorf("server: size %d owner %d", a.Size, a.UID)
	}
	if data, err := os.ReadFile(created); err != nil || len(data) != 100 || string(data[:4]) != "abc\x00" {
		t.Errorf("contents written through the descriptor: %q %v", data, err)
	}
	err = f.asCaller(otherUID, otherGID, nil, func() error { return unix.Truncate(created, 10) })
	wantErrno(t, "truncate(2) by path of the owner's mode 0 file", err, syscall.EACCES)

	err = f.asCaller(otherUID, otherGID, nil, func() error {
		fd, err := unix.Open(chmodded, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Fchmod(fd, 0); err != nil {
			return err
		}
		if err := unix.Ftruncate(fd, 7); err != nil {
			return err
		}
		return unix.Ftruncate(fd, 0)
	})
	if err != nil {
		t.Errorf("open 0644, fchmod 0, ftruncate: %v", err)
	}
	if a := f.sdkStat(t, chmodded); a.Size != 0 || a.Mode&0o7777 != 0 {
		t.Errorf("server: size %d mode %o", a.Size, a.Mode&0o7777)
	}
	// A descriptor open for reading only gives no such right.
	err = f.asCaller(otherUID, otherGID, nil, func() error {
		if err := os.Chmod(chmodded, 0o444); err != nil {
			return err
		}
		fd, err := unix.Open(chmodded, unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Ftruncate(fd, 5)
	})
	if err == nil {
		t.Errorf("ftruncate through a read-only descriptor succeeded")
	}
}

// Opening a FIFO checks its mode bits as for any file, though the open
// never reaches the mount.
func testSpecialFileModes(t *testing.T, f *fixture, dir string) {
	openDir(t, dir)
	private, readable := filepath.Join(dir, "private"), filepath.Join(dir, "readable")
	must(t, unix.Mkfifo(private, 0o600))
	must(t, unix.Mkfifo(readable, 0o644))
	must(t, syscall.Chmod(readable, 0o644))
	open := func(p string, flags int) error {
		return f.asCaller(otherUID, otherGID, nil, func() error {
			fd, err := unix.Open(p, flags|unix.O_NONBLOCK, 0)
			if err != nil {
				return err
			}
			return unix.Close(fd)
		})
	}
	wantErrno(t, "another user reading root's 0600 FIFO", open(private, unix.O_RDONLY), syscall.EACCES)
	wantErrno(t, "another user opening root's 0600 FIFO read-write", open(private, unix.O_RDWR), syscall.EACCES)
	if err := open(readable, unix.O_RDONLY); err != nil {
		t.Errorf("another user reading root's 0644 FIFO: %v", err)
	}
	wantErrno(t, "another user opening root's 0644 FIFO read-write", open(readable, unix.O_RDWR), syscall.EACCES)
	if err := f.asCaller(0, 0, nil, func() error {
		fd, err := unix.Open(private, unix.O_RDWR|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	}); err != nil {
		t.Errorf("root opening its 0600 FIFO: %v", err)
	}
}

// Removing search permission from a directory stops every path through
// it at once, also for names the kernel has just looked up and cached:
// chmod, chown, link, open and truncate of a file below it fail with
// EACCES for the caller who did all of them a moment before.
func testSearchRevoked(t *testing.T, f *fixture, dir string) {
	openDir(t, dir)
	gate := filepath.Join(dir, "gate")
	must(t, os.Mkdir(gate, 0o777))
	must(t, syscall.Chmod(gate, 0o777))
	sub := filepath.Join(gate, "sub")
	must(t, os.Mkdir(sub, 0o777))
	must(t, syscall.Chmod(sub, 0o777))
	file := filepath.Join(sub, "f")
	must(t, os.WriteFile(file, nil, 0o666))
	must(t, os.Chown(file, otherUID, otherGID))
	linked := 0
	ops := []struct {
		name string
		do   func() error
	}{
		{"chmod", func() error { return unix.Chmod(file, 0o666) }},
		{"chown", func() error { return unix.Chown(file, otherUID, otherGID) }},
		{"link", func() error {
			linked++
			return unix.Link(file, filepath.Join(dir, "link"+itoa(linked)))
		}},
		{"open", func() error {
			fd, err := unix.Open(file, unix.O_RDWR, 0)
			if err != nil {
				return err
			}
			return unix.Close(fd)
		}},
		{"truncate", func() error { return unix.Truncate(file, 0) }},
		{"stat", func() error {
			var st unix.Stat_t
			return unix.Stat(file, &st)
		}},
	}
	for _, op := range ops {
		if err := f.asCaller(otherUID, otherGID, nil, op.do); err != nil {
			t.Fatalf("%s before the change: %v", op.name, err)
		}
	}
	must(t, syscall.Chmod(gate, 0o666)) // no search permission for anyone but root
	for _, op := range ops {
		err := f.asCaller(otherUID, otherGID, nil, op.do)
		wantErrno(t, op.name+" through a directory without search permission", err, syscall.EACCES)
	}
	// Search permission on the directory itself is what counts: given back
	// to the group only, a member passes and others do not.
	must(t, os.Chown(gate, 0, sharedGID))
	must(t, syscall.Chmod(gate, 0o676))
	err := f.asCaller(otherUID, otherGID, []uint32{sharedGID}, ops[3].do)
	if err != nil {
		t.Errorf("open through a directory searchable by the caller's group: %v", err)
	}
	err = f.asCaller(thirdUID, thirdUID, nil, ops[5].do)
	wantErrno(t, "stat through a directory searchable by another group", err, syscall.EACCES)
}
