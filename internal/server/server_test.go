package server

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

func TestServeAndRecover(t *testing.T) {
	dir := t.TempDir()
	for _, every := range []int{1_000_000, 7} { // without and with checkpoints on the way
		t.Run(map[int]string{1_000_000: "log-only", 7: "checkpoints"}[every], func(t *testing.T) {
			cfg := Config{Dir: filepath.Join(dir, t.Name()), CheckpointEvery: every}
			s, addr := openAndServe(t, cfg)
			stop := func() { shutdown(t, s) }
			ctx := context.Background()
			c := dial(t, addr, client.Cred{})
			if err := c.MkdirAll(ctx, "/a/b/c", 0o755); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"/a/f1", "/a/b/f2", "/a/b/c/f3"} {
				if _, err := c.Create(ctx, name, 0o640); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Rename(ctx, "/a/b/f2", "/a/g2"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Symlink(ctx, "b/c", "/a/link"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Link(ctx, "/a/f1", "/a/b/hard"); err != nil {
				t.Fatal(err)
			}
			if err := c.SetXattr(ctx, "/a/f1", "user.k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Chmod(ctx, "/a/b", 0o1777); err != nil {
				t.Fatal(err)
			}
			if err := c.Unlink(ctx, "/a/b/c/f3"); err != nil {
				t.Fatal(err)
			}
			_, err := c.Stat(ctx, "/a/b/c/f3")
			if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, syscall.ENOENT) {
				t.Fatalf("stat of removed file: %v, want ENOENT matching fs.ErrNotExist", err)
			}
			before := snapshot(t, c)
			stop()

			_, addr = openAndServe(t, cfg)
			c = dial(t, addr, client.Cred{})
			after := snapshot(t, c)
			if len(after) != len(before) {
				t.Fatalf("after restart %d nodes, before %d", len(after), len(before))
			}
			for p, a := range before {
				if after[p] != a {
					t.Errorf("%s: after restart %+v, before %+v", p, after[p], a)
				}
			}
			if fi, err := c.Stat(ctx, "/a/link/f3"); err == nil {
				t.Errorf("stat through symlink found removed file %v", fi.Name())
			}
			if v, err := c.GetXattr(ctx, "/a/b/hard", "user.k"); err != nil || string(v) != "v" {
				t.Errorf("xattr via hard link = %q, %v", v, err)
			}
		})
	}
}

// snapshot lists every node's attributes by path.
func snapshot(t *testing.T, c *client.Client) map[string]client.Attr {
	t.Helper()
	ctx := context.Background()
	out := map[string]client.Attr{}
	var walk func(p string)
	walk = func(p string) {
		fi, err := c.Lstat(ctx, p)
		if err != nil {
			t.Fatalf("lstat %s: %v", p, err)
		}
		out[p] = fi.Attr()
		if !fi.IsDir() {
			return
		}
		ents, err := c.ReadDir(ctx, p)
		if err != nil {
			t.Fatalf("readdir %s: %v", p, err)
		}
		for _, e := range ents {
			walk(filepath.Join(p, e.Name()))
		}
	}
	walk("/")
	return out
}

func TestPermissionsTravelWithCalls(t *testing.T) {
	_, addr := openAndServe(t, Config{Dir: t.TempDir()})
	ctx := context.Background()
	root := dial(t, addr, client.Cred{})
	if _, err := root.Mkdir(ctx, "/private", 0o700); err != nil {
		t.Fatal(err)
	}
	alice := root.As(client.Cred{UID: 1000, GID: 1000})
	if _, err := alice.Create(ctx, "/private/x", 0o644); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("create in 0700 root dir as uid 1000: %v, want EACCES", err)
	}
	if _, err := root.Chown(ctx, "/private", 1000, 1000); err != nil {
		t.Fatal(err)
	}
	fi, err := alice.Create(ctx, "/private/x", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if a := fi.Attr(); a.UID != 1000 || a.GID != 1000 {
		t.Fatalf("owner of new file %d:%d, want 1000:1000", a.UID, a.GID)
	}
}

func TestVerifyFindsNoFaultInRecoveredState(t *testing.T) {
	dir := t.TempDir()
	s, addr := openAndServe(t, Config{Dir: dir, CheckpointEvery: 50})
	stop := func() { shutdown(t, s) }
	c := dial(t, addr, client.Cred{})
	ctx := context.Background()
	for i := range 200 {
		d := filepath.Join("/", string(rune('a'+i%5)))
		c.MkdirAll(ctx, d, 0o755)
		if _, err := c.Create(ctx, filepath.Join(d, time.Duration(i).String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	n, err := Verify(Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1+5+200 {
		t.Fatalf("verify found %d nodes, want %d", n, 1+5+200)
	}
}
