package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// sumTree fills a server with a small tree of every kind of node, each
// with fixed times, so that two servers filled alike have equal sums.
func sumTree(t *testing.T, addr string, edit func(ctx context.Context, c *client.Client)) {
	t.Helper()
	ctx := t.Context()
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.MkdirAll(ctx, "/a/b", 0o755))
	must(c.WriteFile(ctx, "/a/data", []byte("the contents of a file"), 0o644))
	must(c.WriteFile(ctx, "/a/b/empty", nil, 0o600))
	_, err = c.Symlink(ctx, "../data", "/a/b/sym")
	must(err)
	_, err = c.Link(ctx, "/a/data", "/a/b/hard")
	must(err)
	must(c.SetXattr(ctx, "/a/data", "user.tag", []byte("blue"), 0))
	must(c.SetXattr(ctx, "/a/b", "user.dir", []byte{0, 1, 2}, 0))
	if edit != nil {
		edit(ctx, c)
	}
	stamp := time.Unix(1_700_000_000, 123).UnixNano()
	for _, p := range []string{"/", "/a", "/a/b", "/a/data", "/a/b/empty", "/a/b/sym"} {
		fi, err := c.Lstat(ctx, p)
		must(err)
		_, err = c.SetAttrIno(ctx, fi.Ino(), client.SetAttr{Valid: client.SetAtime | client.SetMtime, Atime: stamp, Mtime: stamp})
		must(err)
	}
}

func sumOf(t *testing.T, addr, p string) treeSum {
	t.Helper()
	var s treeSum
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "sum", "--json", p)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSumEqualTreesAndEveryDifference(t *testing.T) {
	a, b := serveWithStorage(t), serveWithStorage(t)
	sumTree(t, a, nil)
	sumTree(t, b, nil)
	sa, sb := sumOf(t, a, "/"), sumOf(t, b, "/")
	if sa != sb {
		t.Fatalf("equal trees, different sums:\n%+v\n%+v", sa, sb)
	}
	want := treeSum{Path: "/", Sum: sa.Sum, Dirs: 3, Files: 2, Symlinks: 1, Links: 1, Xattrs: 2, Bytes: 22}
	if sa != want {
		t.Fatalf("sum %+v, want %+v", sa, want)
	}
	if s := sumOf(t, a, "/a/b"); s.Sum == sa.Sum || s.Dirs != 1 || s.Files != 2 || s.Links != 0 {
		t.Errorf("sum of /a/b %+v", s)
	}

	edits := map[string]func(ctx context.Context, c *client.Client){
		"contents": func(ctx context.Context, c *client.Client) {
			c.WriteFile(ctx, "/a/data", []byte("the contents of a filE"), 0o644)
		},
		"mode": func(ctx context.Context, c *client.Client) { c.Chmod(ctx, "/a/b/empty", 0o640) },
		"xattr value": func(ctx context.Context, c *client.Client) {
			c.SetXattr(ctx, "/a/b", "user.dir", []byte{0, 1, 3}, 0)
		},
		"extra xattr": func(ctx context.Context, c *client.Client) {
			c.SetXattr(ctx, "/a/b/empty", "user.x", nil, 0)
		},
		"symlink target": func(ctx context.Context, c *client.Client) {
			c.Unlink(ctx, "/a/b/sym")
			c.Symlink(ctx, "../dat", "/a/b/sym")
		},
		"copy instead of link": func(ctx context.Context, c *client.Client) {
			c.Unlink(ctx, "/a/b/hard")
			c.WriteFile(ctx, "/a/b/hard", []byte("the contents of a file"), 0o644)
			c.SetXattr(ctx, "/a/b/hard", "user.tag", []byte("blue"), 0)
			fi, _ := c.Lstat(ctx, "/a/b/hard")
			c.SetAttrIno(ctx, fi.Ino(), client.SetAttr{Valid: client.SetMtime, Mtime: time.Unix(1_700_000_000, 123).UnixNano()})
		},
		"name": func(ctx context.Context, c *client.Client) { c.Rename(ctx, "/a/b/hard", "/a/b/hard2") },
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			c := serveWithStorage(t)
			sumTree(t, c, edit)
			if s := sumOf(t, c, "/"); s.Sum == sa.Sum {
				t.Errorf("sum unchanged: %+v", s)
			}
		})
	}
}

func TestSumText(t *testing.T) {
	a := serveWithStorage(t)
	sumTree(t, a, nil)
	s := sumOf(t, a, "/")
	out := mustCanopy(t, a, "sum", "/")
	want := s.Sum + "  /\n3 directories, 2 files, 1 symlinks, 0 others, 1 hard links, 2 xattrs, 22 bytes\n"
	if out != want {
		t.Errorf("canopy sum:\n%s\nwant\n%s", out, want)
	}
}
