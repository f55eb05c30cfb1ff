package fuse

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// requireACLTools skips a test that needs setfacl and getfacl.
func requireACLTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"setfacl", "getfacl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: no %s (apt-get install acl)", tool)
		}
	}
}

// TestACLOnMount: setfacl -m u:1000:rw lets uid 1000 write a file it
// could not, getfacl prints the entry back, chmod's new mask takes the
// right away again at once (the kernel's cached ACL is dropped), and a
// directory's default ACL is inherited by new files and directories
// whatever the creator's umask.
func TestACLOnMount(t *testing.T) {
	requireACLTools(t)
	f := mountTest(t, Options{AllowOther: true})
	openUp(t, f.mnt)
	must(t, os.Mkdir(f.path("d"), 0o777))
	must(t, os.Chmod(f.path("d"), 0o777))
	file := f.path("d", "f")
	must(t, os.WriteFile(file, []byte("x"), 0o640))
	must(t, os.Chmod(file, 0o640))

	if err := writeAs(f, 1000, 1000, nil, file); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("uid 1000 writes a 0640 root file: %v, want EACCES", err)
	}
	run(t, "", "setfacl", "-m", "u:1000:rw", file)
	if err := writeAs(f, 1000, 1000, nil, file); err != nil {
		t.Fatalf("uid 1000 writes after setfacl -m u:1000:rw: %v", err)
	}
	if err := writeAs(f, 1001, 1001, nil, file); !errors.Is(err, syscall.EACCES) {
		t.Errorf("uid 1001 writes: %v, want EACCES", err)
	}
	out := run(t, "", "getfacl", "-cn", file)
	for _, want := range []string{"user:1000:rw-", "mask::rw-", "group::r--", "other::---"} {
		if !strings.Contains(out, want) {
			t.Errorf("getfacl lacks %q:\n%s", want, out)
		}
	}
	fi, err := os.Stat(file)
	must(t, err)
	if fi.Mode().Perm() != 0o660 {
		t.Errorf("mode after setfacl: %o, want 660 (the mask in the group bits)", fi.Mode().Perm())
	}
	must(t, os.Chmod(file, 0o640))
	if err := writeAs(f, 1000, 1000, nil, file); !errors.Is(err, syscall.EACCES) {
		t.Errorf("uid 1000 writes after chmod 640 (mask r--): %v, want EACCES", err)
	}
	if out := run(t, "", "getfacl", "-cn", file); !strings.Contains(out, "mask::r--") {
		t.Errorf("getfacl after chmod 640:\n%s", out)
	}

	// Inheritance, with the creator's umask 077 ignored.
	run(t, "", "setfacl", "-d", "-m", "u:1000:rw", f.path("d"))
	old := syscall.Umask(0o077)
	errNew := os.WriteFile(f.path("d", "new"), nil, 0o666)
	errSub := os.Mkdir(f.path("d", "sub"), 0o777)
	syscall.Umask(old)
	must(t, errNew)
	must(t, errSub)
	if err := writeAs(f, 1000, 1000, nil, f.path("d", "new")); err != nil {
		t.Errorf("uid 1000 writes a new file under the default ACL: %v", err)
	}
	out = run(t, "", "getfacl", "-cn", f.path("d", "new"))
	if !strings.Contains(out, "user:1000:rw-\n") || !strings.Contains(out, "mask::rw-") {
		t.Errorf("getfacl of the new file:\n%s", out)
	}
	out = run(t, "", "getfacl", "-cn", f.path("d", "sub"))
	if !strings.Contains(out, "default:user:1000:rw-") || !strings.Contains(out, "\nuser:1000:rw-") {
		t.Errorf("getfacl of the new directory:\n%s", out)
	}
	// Without a default ACL the umask still applies.
	old = syscall.Umask(0o077)
	errPlain := os.WriteFile(f.path("plain"), nil, 0o666)
	syscall.Umask(old)
	must(t, errPlain)
	if fi, err := os.Stat(f.path("plain")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a file outside the default ACL with umask 077: %v, %v; want 600", fi.Mode(), err)
	}
}
