package fuse_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/cli"
	"github.com/canopyfs/canopy/internal/fuse"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// treeEntry is what a restore must bring back of one path: its type and
// permission bits, owner, size, contents, symlink target and xattrs, and
// for a non-directory its mtime (a directory's changes with every entry
// removed and restored).
type treeEntry struct {
	mode     fs.FileMode
	uid, gid uint32
	size     int64
	mtime    int64
	sum      [32]byte
	target   string
	xattrs   string
}

// snapshotTree records every path below root.
func snapshotTree(t *testing.T, root string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	err := filepath.Walk(root, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat", p)
		}
		e := treeEntry{mode: fi.Mode(), uid: st.Uid, gid: st.Gid, size: fi.Size()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if e.target, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.sum = sha256.Sum256(b)
		}
		if !fi.IsDir() {
			e.mtime = fi.ModTime().UnixNano()
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			buf := make([]byte, 4096)
			if n, err := unix.Listxattr(p, buf); err == nil {
				var parts []string
				for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
					if !strings.HasPrefix(name, "user.") {
						continue
					}
					v := make([]byte, 256)
					k, err := unix.Getxattr(p, name, v)
					if err != nil {
						return err
					}
					parts = append(parts, name+"="+string(v[:k]))
				}
				e.xattrs = strings.Join(parts, ",")
			}
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTrashRestoreOnMount: `rm -r` of a tree on a real mount, then
// `canopy trash restore` of its path, brings back every file, directory
// and symlink with its mode, owner, size, mtime, xattrs and contents.
func TestTrashRestoreOnMount(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("skipped: a real FUSE mount needs /dev/fuse (%v)", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: a real FUSE mount needs root")
	}
	if _, err := exec.LookPath("rm"); err != nil {
		t.Skip("skipped: no rm(1)")
	}
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), TrashDays: 1})
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := fuse.MountAt(c, mnt, fuse.Options{})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		done := make(chan error, 1)
		go func() { done <- m.Close() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = unix.Unmount(mnt, unix.MNT_DETACH)
		}
		c.Close()
	})
	p := func(parts ...string) string { return filepath.Join(append([]string{mnt}, parts...)...) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// The tree: nested directories of several modes and owners, files
	// from empty to several blocks, a symlink, an xattr, set mtimes.
	must(os.MkdirAll(p("t", "a", "b", "c"), 0o755))
	must(os.Mkdir(p("t", "priv"), 0o700))
	must(os.Chmod(p("t", "a"), 0o750))
	old := time.Date(2020, 5, 6, 7, 8, 9, 0, time.UTC)
	for i, size := range []int{0, 1, 4095, 4096, 70_000, 300_000} {
		dir := [][]string{{"t"}, {"t", "a"}, {"t", "a", "b"}, {"t", "a", "b", "c"}, {"t", "priv"}, {"t", "a"}}[i]
		f := p(append(dir, fmt.Sprintf("f%d", i))...)
		data := bytes.Repeat([]byte{byte('a' + i)}, size)
		must(os.WriteFile(f, data, 0o644))
		must(os.Chmod(f, []fs.FileMode{0o644, 0o600, 0o755, 0o640, 0o444, 0o664}[i]))
		must(os.Chown(f, 1000+i, 2000+i))
		must(os.Chtimes(f, old, old.Add(time.Duration(i)*time.Hour)))
	}
	must(os.Symlink("a/b/f2", p("t", "link")))
	must(unix.Setxattr(p("t", "a", "f1"), "user.tag", []byte("kept"), 0))
	must(os.Chown(p("t", "a", "b"), 1000, 1000))
	want := snapshotTree(t, p("t"))
	if len(want) != 12 {
		t.Fatalf("the tree has %d paths, want 12: %v", len(want), want)
	}

	if out, err := exec.Command("rm", "-r", p("t")).CombinedOutput(); err != nil {
		t.Fatalf("rm -r: %v: %s", err, out)
	}
	if _, err := os.Lstat(p("t")); !os.IsNotExist(err) {
		t.Fatalf("/t after rm -r: %v", err)
	}
	tr, err := c.TrashList(t.Context(), "/")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Files != 12 || tr.Bytes != 0+1+4095+4096+70_000+300_000 {
		t.Fatalf("the trash holds %d nodes and %d bytes, want 12 and %d", tr.Files, tr.Bytes, 0+1+4095+4096+70_000+300_000)
	}

	if code := cli.Main([]string{"--addr", addr, "trash", "restore", "/t"}); code != 0 {
		t.Fatalf("canopy trash restore /t: exit status %d", code)
	}
	got := snapshotTree(t, p("t"))
	for path, w := range want {
		g, ok := got[path]
		switch {
		case !ok:
			t.Errorf("%s: not restored", path)
		case g != w:
			t.Errorf("%s: restored as %+v, was %+v", path, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d paths after the restore, %d before", len(got), len(want))
	}
	if tr, err := c.TrashList(t.Context(), "/"); err != nil || len(tr.Entries) != 0 {
		t.Errorf("the trash after the restore: %+v %v", tr, err)
	}
}
