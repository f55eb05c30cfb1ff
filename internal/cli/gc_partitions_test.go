package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/layout"
	"github.com/canopyfs/canopy/internal/protocol"
)

// TestSweepKeepsFilesRenamedAcrossPartitions runs `canopy up --partitions
// 2` with a collector that sweeps for orphans every 100 ms, and ages every
// object past the sweep's grace once written: a file written in partition 1 and renamed
// into partition 0 keeps its slices, whose ids carry partition 1, and
// partition 1's sweep must not take their objects for orphans. An object
// no partition knows, put in partition 1's share of the store after the
// rename, shows that sweeps ran meanwhile: it must go. fsck of either
// partition, which asks the others too, finds the renamed file's object
// neither orphaned nor missing.
func TestSweepKeepsFilesRenamedAcrossPartitions(t *testing.T) {
	dir := t.TempDir()
	up := startUpArgs(t, "up", "--dir", dir, "--listen", "127.0.0.1:0", "--partitions", "2",
		"--gc-grace", "10m", "--gc-interval", "10ms", "--gc-delay", "1h")
	ctx, c := dialFor(t, up.addr)

	want := make([]byte, 300<<10)
	rand.Read(want)
	if err := c.WriteFile(ctx, "/p1/f", want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/p1/f", "/g"); err != nil {
		t.Fatalf("rename across partitions: %v", err)
	}
	fi, err := c.Stat(ctx, "/g")
	if err != nil || protocol.PartitionOf(uint64(fi.Ino())) != 0 {
		t.Fatalf("the renamed file: %+v, %v; want it in partition 0", fi, err)
	}

	// fsck of either partition finds nothing wrong: not an orphan in
	// partition 1's share, not a missing object in partition 0.
	for _, part := range []string{"0", "1"} {
		if out, err := canopy(t, up.addr, "fsck", "--partition", part); err != nil {
			t.Fatalf("fsck --partition %s after the rename: %v\n%s", part, err, out)
		}
	}
	// Every object is an hour old now: past the grace, a candidate for the
	// sweep unless some partition lists its slice.
	old := time.Now().Add(-time.Hour)
	objects := 0
	err = filepath.WalkDir(filepath.Join(dir, "objects", "chunks"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			objects++
			err = os.Chtimes(p, old, old)
		}
		return err
	})
	if err != nil || objects == 0 {
		t.Fatalf("aging the objects: %d objects, %v", objects, err)
	}
	orphan := filepath.Join(dir, "objects", filepath.FromSlash(layout.BlockKey(protocol.MakeIno(1, 1<<40), 0, 5)))
	if err := os.MkdirAll(filepath.Dir(orphan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("stray"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(orphan, old, old); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(orphan); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("partition 1's collector never swept the stray object")
		}
	}
	// Two more sweeps' worth, in case the stray went in the first half of
	// a sweep that had listed the slices before the rename.
	time.Sleep(300 * time.Millisecond)
	got, err := c.ReadFile(ctx, "/g")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the renamed file after partition 1's sweeps: %d bytes, %v; want its %d bytes", len(got), err, len(want))
	}
}

// TestUpFlushesInlineFiles: `canopy up` runs the flusher: a small file's bytes, sent inline with its commit, become an
// object in the store without anyone asking, and the file reads the same
// after.
func TestUpFlushesInlineFiles(t *testing.T) {
	dir := t.TempDir()
	up := startUpArgs(t, "up", "--dir", dir, "--listen", "127.0.0.1:0")
	ctx, c := dialFor(t, up.addr)
	want := []byte("small enough to go inline")
	if err := c.WriteFile(ctx, "/small", want, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, "/small")
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := c.Chunks(ctx, fi.Ino(), 0, 1)
	if err != nil || len(chunks) != 1 || len(chunks[0].Slices) != 1 {
		t.Fatalf("chunks: %+v %v", chunks, err)
	}
	key := filepath.Join(dir, "objects", filepath.FromSlash(layout.BlockKey(chunks[0].Slices[0].ID, 0, len(want))))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got, err := os.ReadFile(key); err == nil {
			if !bytes.Equal(got, want) {
				t.Fatalf("the flushed object holds %q, want %q", got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no object %s after 30 s", key)
		}
	}
	if got, err := c.ReadFile(ctx, "/small"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after the flush: %q %v", got, err)
	}
}

// dialFor dials addr for the rest of the test, with a context that ends
// with it (or after a minute).
func dialFor(t *testing.T, addr string) (context.Context, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c
}
