package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

func TestApplyMountOptions(t *testing.T) {
	var o mountFlags
	addr := "a:1"
	if err := applyMountOptions("allow_other,default_permissions,ro,_netdev,nofail,noatime,x-systemd.automount,attr_timeout=2.5,entry_timeout=3s,negative_timeout=0.5,buffer_size=64MiB,metrics=127.0.0.1:9,log=/tmp/l,addr=b:2", &o, &addr); err != nil {
		t.Fatal(err)
	}
	if !o.allowOther || !o.defaultPerms || !o.readOnly || o.attrTimeout != 2500*time.Millisecond || o.entryTimeout != 3*time.Second || o.negativeTimeout != 500*time.Millisecond ||
		o.bufferSize.v != 64<<20 || o.metricsListen != "127.0.0.1:9" || o.logFile != "/tmp/l" || addr != "b:2" {
		t.Errorf("options gave %+v, addr %s", o, addr)
	}
	if err := applyMountOptions("ro,rw", &o, &addr); err != nil || o.readOnly {
		t.Errorf("rw after ro: read-only %v (%v)", o.readOnly, err)
	}
	for _, bad := range []string{"bogus", "attr_timeout=x", "allow_others", "buffer_size=lots"} {
		if err := applyMountOptions(bad, &o, &addr); err == nil {
			t.Errorf("-o %s accepted", bad)
		}
	}
}

func TestMountHelperArgs(t *testing.T) {
	cases := []struct {
		in   []string
		want []string
	}{
		{[]string{"127.0.0.1:9400", "/mnt", "-o", "rw,allow_other"}, []string{"--addr", "127.0.0.1:9400", "mount", "-d", "-o", "rw,allow_other", "--", "/mnt"}},
		{[]string{"canopy://h:1", "/m", "-n", "-s", "-t", "canopy"}, []string{"--addr", "h:1", "mount", "-d", "--", "/m"}},
		{[]string{"h:1", "/m", "-oro"}, []string{"--addr", "h:1", "mount", "-d", "-o", "ro", "--", "/m"}},
	}
	for _, c := range cases {
		got, err := mountHelperArgs(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %q (%v), want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range [][]string{{"h:1"}, {"h:1", "/m", "-o"}, {"h:1", "/m", "--weird"}} {
		if _, err := mountHelperArgs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestMountTypeCanopyAndFstab builds canopy, links it as
// /sbin/mount.canopy, and mounts with `mount -t canopy` and from an fstab
// line (read from a file of its own with mount -T), then unmounts with
// umount.
func TestMountTypeCanopyAndFstab(t *testing.T) {
	requireFUSE(t)
	mountBin, err := exec.LookPath("mount")
	if err != nil {
		t.Skip("skipped: no mount(8)")
	}
	const helper = "/sbin/mount.canopy"
	if _, err := os.Lstat(helper); err == nil {
		t.Skipf("skipped: %s exists already and is not this test's", helper)
	}
	bin := filepath.Join(t.TempDir(), "canopy")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/canopyfs/canopy/cmd/canopy").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Symlink(bin, helper); err != nil {
		t.Skipf("skipped: cannot install %s: %v", helper, err)
	}
	t.Cleanup(func() { os.Remove(helper) })
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	mustCanopy(t, addr, "touch", "/there")

	// mount(8) waits for the helper only; the background mount it starts
	// keeps the helper's stderr, so a command's output is read for at
	// most a while after it exits.
	run := func(name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.WaitDelay = 2 * time.Second
		out, err := cmd.CombinedOutput()
		if errors.Is(err, exec.ErrWaitDelay) {
			err = nil
		}
		return string(out), err
	}
	umount := func(dir string) {
		t.Helper()
		if out, err := run("umount", dir); err != nil {
			t.Fatalf("umount %s: %v\n%s", dir, err, out)
		}
		if !pollUntil(10*time.Second, func() bool { return !isMounted(t, dir) }) {
			t.Fatalf("%s still mounted after umount", dir)
		}
	}

	// mount -t canopy, read-only.
	dir := mountDir(t)
	if out, err := run(mountBin, "-t", "canopy", "-o", "ro,allow_other,_netdev", addr, dir); err != nil {
		t.Fatalf("mount -t canopy: %v\n%s", err, out)
	}
	if !isMounted(t, dir) {
		t.Fatal("not mounted after mount -t canopy")
	}
	if _, err := os.Stat(filepath.Join(dir, "there")); err != nil {
		t.Errorf("stat through the mount: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("create on a ro mount: %v", err)
	}
	if out, _ := run("findmnt", "-n", "-o", "OPTIONS", dir); !strings.Contains(out, "ro") || !strings.Contains(out, "allow_other") {
		t.Errorf("findmnt options %q", out)
	}
	umount(dir)

	// An fstab line, mounted by its mount point.
	dir2 := mountDir(t)
	fstab := filepath.Join(t.TempDir(), "fstab")
	line := addr + " " + dir2 + " canopy _netdev,nofail,allow_other,default_permissions 0 0\n"
	if err := os.WriteFile(fstab, []byte("# test\n"+line), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(mountBin, "-T", fstab, dir2); err != nil {
		t.Fatalf("mount from fstab %q: %v\n%s", line, err, out)
	}
	if err := os.WriteFile(filepath.Join(dir2, "written"), []byte("x"), 0o644); err != nil {
		t.Errorf("write through the fstab mount: %v", err)
	}
	umount(dir2)
	if out := mustCanopy(t, addr, "ls", "/"); !strings.Contains(out, "written") {
		t.Errorf("the file written through the mount is not on the server:\n%s", out)
	}
}
