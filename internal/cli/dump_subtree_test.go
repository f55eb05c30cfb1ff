package cli

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// TestDumpSubtreeAndLoad dumps the subtree under /base/d001 in both
// forms and loads each into a new server: its whole tree has the sum the
// subtree had (paths relative to it, with its files' contents, xattrs,
// symlinks and hard links). A node linked from outside the subtree too
// keeps only its links inside; a path that is no directory is refused.
func TestDumpSubtreeAndLoad(t *testing.T) {
	storage := "file://" + t.TempDir()
	_, addr := servertest.Start(t, server.Config{Storage: storage})
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	fillForDump(t, c, 3000)
	if err := c.MkdirAll(ctx, "/base/d001/deep/er", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, "/base/d001/deep/er/data", []byte("deep down"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := c.SetXattr(ctx, "/base/d001", "user.top", []byte("the top's own"), 0); err != nil {
		t.Fatal(err)
	}
	sub := sumOf(t, addr, "/base/d001")
	if sub.Files == 0 || sub.Symlinks == 0 || sub.Links == 0 || sub.Xattrs == 0 || sub.Bytes == 0 {
		t.Fatalf("subtree: %+v", sub)
	}
	sub.Path = "/"
	for _, format := range []string{"json", "binary"} {
		dump := filepath.Join(t.TempDir(), "sub."+format)
		mustCanopy(t, addr, "dump", "/base/d001", "--format", format, "-o", dump)
		if got := sumOf(t, loadInto(t, dump, storage), "/"); got != sub {
			t.Fatalf("%s: loaded subtree %+v, want %+v", format, got, sub)
		}
	}

	// A second link outside the subtree is not in its dump.
	if _, err := c.Link(ctx, "/base/d001/deep/er/data", "/base/elsewhere"); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(t.TempDir(), "sub.binary")
	mustCanopy(t, addr, "dump", "base/d001/", "--format", "binary", "-o", dump)
	loaded := loadInto(t, dump, storage)
	lc, err := client.Dial(loaded, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	fi, err := lc.Stat(ctx, "/deep/er/data")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Attr().Nlink != 1 {
		t.Errorf("a file linked from outside the subtree too: %d links in the dump, want 1", fi.Attr().Nlink)
	}
	if b, err := lc.ReadFile(ctx, "/deep/er/data"); err != nil || string(b) != "deep down" {
		t.Errorf("/deep/er/data holds %q (%v)", b, err)
	}
	if _, err := lc.Stat(ctx, "/base"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat /base in the loaded subtree: %v", err)
	}

	for p, want := range map[string]error{"/base/d001/f0000": syscall.ENOTDIR, "/nowhere": syscall.ENOENT} {
		if _, err := canopy(t, addr, "dump", p, "-o", filepath.Join(t.TempDir(), "x")); !errors.Is(err, want) {
			t.Errorf("dump %s: %v, want %v", p, err, want)
		}
	}
}

// TestDumpSetAcrossPartitions runs `canopy up --partitions 3` (/p1 and /p2
// mount partitions 1 and 2) with one more mount entry, /sub/inner ->
// partition 2's /deep. `canopy dump /` through the router is a dump set
// of the three partitions, and `canopy dump /sub` one of partition 0's
// /sub and partition 2's /deep; each, in both forms, loaded into a fresh
// `canopy up --dir` layout on the same object store, has the tree sum the
// dumped tree had.
func TestDumpSetAcrossPartitions(t *testing.T) {
	src := t.TempDir()
	up := startUpArgs(t, "up", "--dir", src, "--listen", "127.0.0.1:0", "--partitions", "3")
	c, err := client.Dial(up.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	for _, d := range []string{"/top/d", "/sub/own", "/p1/d/e", "/p2/deep/x"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range []string{"/top/d/f", "/sub/own/f", "/p1/d/e/f", "/p1/g", "/p2/deep/x/f", "/p2/outside"} {
		if err := c.WriteFile(ctx, p, []byte(strings.Repeat(p, i+1)), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetXattr(ctx, "/p1/d", "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Symlink(ctx, "f", "/p2/deep/x/link"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Link(ctx, "/p1/d/e/f", "/p1/d/hard"); err != nil {
		t.Fatal(err)
	}
	mustCanopy(t, up.addr, "mounttable", "add", "/sub/inner", "2:/deep")
	storage := "file://" + filepath.Join(src, "objects")

	// Partition 2 is mounted twice below /: refused until one goes.
	if _, err := canopy(t, up.addr, "dump", "/", "-o", filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "mounted twice") {
		t.Fatalf("dump / with partition 2 mounted twice: %v", err)
	}
	mustCanopy(t, up.addr, "mounttable", "rm", "/sub/inner")
	waitRouted(t, c, "/sub/inner/x", false)
	for _, tc := range []struct{ path, format string }{{"/", "json"}, {"/", "binary"}, {"/sub", "json"}, {"/sub", "binary"}} {
		want := sumOf(t, up.addr, tc.path)
		// / without /sub/inner; /sub with it again (added back below), so
		// with partition 2's /deep/x/f and its symlink.
		if want.Files < 2 || want.Symlinks == 0 || (tc.path == "/" && (want.Links == 0 || want.Xattrs == 0)) {
			t.Fatalf("%s: %+v", tc.path, want)
		}
		dump := filepath.Join(t.TempDir(), "set."+tc.format)
		mustCanopy(t, up.addr, "dump", tc.path, "--format", tc.format, "-o", dump)
		dst := t.TempDir()
		mustCanopy(t, "127.0.0.1:1", "load", "--dir", dst, dump)
		if _, err := canopy(t, "127.0.0.1:1", "load", "--dir", dst, dump); !errors.Is(err, server.ErrNotEmpty) && (err == nil || !strings.Contains(err.Error(), "--force")) {
			t.Errorf("%s %s: a second load over the first: %v", tc.path, tc.format, err)
		}
		mustCanopy(t, "127.0.0.1:1", "load", "--dir", dst, "--force", dump)
		loaded := startUpArgs(t, "up", "--dir", dst, "--listen", "127.0.0.1:0", "--partitions", "3", "--storage", storage, "--no-gc")
		want.Path = "/"
		if got := sumOf(t, loaded.addr, "/"); got != want {
			t.Errorf("%s %s: loaded set %+v, want %+v", tc.path, tc.format, got, want)
		}
		loaded.cmd.Process.Kill()
		loaded.cmd.Wait()
		if tc.path == "/" && tc.format == "binary" {
			mustCanopy(t, up.addr, "mounttable", "add", "/sub/inner", "2:/deep")
			waitRouted(t, c, "/sub/inner/x", true)
		}
	}
}

// waitRouted waits until the router c is connected to resolves p (exists)
// or no longer does: a change of the mount table reaches the router a
// little after the command that made it returns.
func waitRouted(t *testing.T, c *client.Client, p string, exists bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.Stat(t.Context(), p)
		if exists && err == nil || !exists && errors.Is(err, syscall.ENOENT) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router still says %v for %s, 30 s after the mount table changed", err, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
