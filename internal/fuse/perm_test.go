package fuse

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asUser runs a command as uid/gid with supplementary groups and returns
// its output and error.
func asUser(uid, gid uint32, groups []uint32, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	cmd.WaitDelay = time.Second
	timer := time.AfterFunc(30*time.Second, func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	})
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// openUp lets other users reach the mount point: the test's temporary
// directories are private to root.
func openUp(t *testing.T, mnt string) {
	for d := filepath.Dir(mnt); d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			must(t, os.Chmod(d, fi.Mode().Perm()|0o005))
		}
	}
}

// TestPermissionsAsOtherUser runs commands as uid 1000 on a mount open to
// other users: what the mode bits allow works (so the caller's identity
// reaches the server), what they forbid fails with EACCES, and
// supplementary groups count.
func TestPermissionsAsOtherUser(t *testing.T) {
	f := mountTest(t, Options{AllowOther: true})
	openUp(t, f.mnt)
	priv, pub, grp := f.path("priv"), f.path("pub"), f.path("grp")
	must(t, os.Mkdir(priv, 0o700))
	must(t, os.Mkdir(pub, 0o777))
	must(t, syscall.Chmod(pub, 0o777))
	must(t, os.Mkdir(grp, 0o770))
	must(t, syscall.Chmod(grp, 0o770))
	must(t, os.Chown(grp, 0, 2000))
	must(t, os.WriteFile(f.path("pub", "rootfile"), nil, 0o644))

	denied := func(what string, out string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("%s: want EACCES, got %v: %s", what, err, out)
		}
	}
	out, err := asUser(1000, 1000, nil, "mkdir", filepath.Join(priv, "x"))
	denied("mkdir in a 0700 root directory", out, err)
	out, err = asUser(1000, 1000, nil, "ls", priv)
	denied("list a 0700 root directory", out, err)
	out, err = asUser(1000, 1000, nil, "touch", filepath.Join(pub, "rootfile"))
	denied("write times of root's 0644 file", out, err)
	out, err = asUser(1000, 1000, nil, "cat", filepath.Join(pub, "rootfile"))
	if err != nil {
		t.Errorf("read root's 0644 file: %v: %s", err, out)
	}
	out, err = asUser(1000, 1000, nil, "sh", "-c", "echo > "+filepath.Join(pub, "rootfile"))
	denied("open root's 0644 file for writing", out, err)
	out, err = asUser(1000, 1000, nil, "chmod", "777", filepath.Join(pub, "rootfile"))
	if err == nil || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("chmod of root's file: want EPERM, got %v: %s", err, out)
	}

	out, err = asUser(1000, 1000, nil, "mkdir", filepath.Join(pub, "mine"))
	if err != nil {
		t.Fatalf("mkdir in a 0777 directory: %v: %s", err, out)
	}
	if a := f.sdkStat(t, filepath.Join(pub, "mine")); a.UID != 1000 || a.GID != 1000 {
		t.Errorf("directory made by uid 1000 is owned by %d:%d", a.UID, a.GID)
	}
	out, err = asUser(1000, 1000, nil, "touch", filepath.Join(grp, "x"))
	denied("create in a 0770 directory of another group", out, err)
	out, err = asUser(1000, 1000, []uint32{2000}, "touch", filepath.Join(grp, "y"))
	if err != nil {
		t.Errorf("create in a 0770 directory of a supplementary group: %v: %s", err, out)
	}
	out, err = asUser(1000, 1000, nil, "test", "-w", grp)
	if err == nil {
		t.Errorf("access(W_OK) on a directory of another group succeeded: %s", out)
	}
	out, err = asUser(1000, 1000, []uint32{2000}, "test", "-w", grp)
	if err != nil {
		t.Errorf("access(W_OK) with the supplementary group: %v: %s", err, out)
	}
	// Sticky /tmp-like directory: others' files cannot be removed.
	sticky := f.path("sticky")
	must(t, os.Mkdir(sticky, 0o777))
	must(t, syscall.Chmod(sticky, 0o1777))
	must(t, os.WriteFile(filepath.Join(sticky, "rootfile"), nil, 0o666))
	out, err = asUser(1000, 1000, nil, "rm", "-f", filepath.Join(sticky, "rootfile"))
	if err == nil {
		t.Errorf("removed root's file from a sticky directory: %s", out)
	}
}

// TestServerPermissionsMount checks that without default_permissions the
// service's checks deny the same way.
func TestServerPermissionsMount(t *testing.T) {
	f := mountTest(t, Options{AllowOther: true, NoDefaultPermissions: true})
	openUp(t, f.mnt)
	priv := f.path("priv")
	must(t, os.Mkdir(priv, 0o700))
	out, err := asUser(1000, 1000, nil, "mkdir", filepath.Join(priv, "x"))
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("mkdir in a 0700 root directory: want EACCES, got %v: %s", err, out)
	}
}
