package fuse

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// TestDiskCacheAcrossMounts reads a file through a mount with a disk
// cache, then through a new mount of the same cache directory after the
// object store lost the file's blocks: the second mount serves the file
// from the disk cache, whole, and the cache stays under its bound.
func TestDiskCacheAcrossMounts(t *testing.T) {
	requireFUSE(t)
	objects, cacheDir := t.TempDir(), t.TempDir()
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + objects})
	const cacheSize = 64 << 20
	mountWith := func(dir string) (*Mount, *client.Client, string) {
		t.Helper()
		opts := client.Options{Cred: &client.Cred{}}
		if dir != "" {
			opts.Data.CacheDir, opts.Data.CacheDirBytes = dir, cacheSize
		}
		c, err := client.Dial(addr, opts)
		must(t, err)
		mnt := filepath.Join(t.TempDir(), "mnt")
		must(t, os.Mkdir(mnt, 0o755))
		m, err := MountAt(c, mnt, DefaultOptions())
		if err != nil {
			c.Close()
			t.Fatal(err)
		}
		return m, c, mnt
	}
	end := func(m *Mount, c *client.Client) {
		unmountBounded(t, m)
		c.Close()
	}
	want := make([]byte, 9<<20+12345)
	for i := range want {
		want[i] = byte(rand.Uint32())
	}
	m, c, mnt := mountWith("")
	must(t, os.WriteFile(filepath.Join(mnt, "f"), want, 0o644))
	end(m, c)

	m, c, mnt = mountWith(cacheDir)
	got, err := os.ReadFile(filepath.Join(mnt, "f"))
	must(t, err)
	if !bytes.Equal(got, want) {
		t.Fatal("first read: wrong bytes")
	}
	s, ok := c.DiskCacheStats()
	if !ok || s.Stored == 0 || s.Bytes < int64(len(want)) {
		t.Fatalf("after the first read: %+v (ok %v), want the file's blocks stored", s, ok)
	}
	end(m, c)

	// The object store loses every block: only the disk cache has them.
	if _, err := os.Stat(filepath.Join(objects, "chunks")); err != nil {
		t.Fatalf("the object store keeps no blocks where expected: %v", err)
	}
	must(t, os.RemoveAll(filepath.Join(objects, "chunks")))
	m, c, mnt = mountWith(cacheDir)
	defer end(m, c)
	got, err = os.ReadFile(filepath.Join(mnt, "f"))
	must(t, err)
	if !bytes.Equal(got, want) {
		t.Fatal("read after remount: wrong bytes")
	}
	s, _ = c.DiskCacheStats()
	if s.Hits == 0 || s.Torn != 0 || s.Bytes > cacheSize {
		t.Fatalf("after remount: %+v, want hits, nothing torn, at most %d bytes", s, cacheSize)
	}
	t.Logf("disk cache after remount: %+v", s)
}
