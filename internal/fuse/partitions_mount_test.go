package fuse

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/router"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// mountPartitions mounts, through a router on 127.0.0.1, a namespace of
// three partitions sharing one object store: / in partition 0, /p1 in
// partition 1 and /p2 in partition 2.
func mountPartitions(t *testing.T) *fixture {
	t.Helper()
	requireFUSE(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := "file://" + t.TempDir()
	var addrs []string
	for p := range uint16(3) {
		_, addr := servertest.Start(t, server.Config{Partition: p, Storage: store})
		addrs = append(addrs, addr)
	}
	root, err := client.Dial(addrs[0], client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	u := client.TablesUpdate{SetMounts: []client.MountEntry{{Prefix: "/p1", VPart: 1, Target: "/"}, {Prefix: "/p2", VPart: 2, Target: "/"}}}
	for p, addr := range addrs {
		u.SetRoutes = append(u.SetRoutes, client.Route{VPart: uint16(p), Addrs: []string{addr}})
	}
	if _, err := root.UpdateTables(ctx, u); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/p1", "/p2"} { // the mount points, as `canopy mounttable add` makes them
		if _, err := root.Mkdir(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, err := router.Start(ctx, router.Config{Listen: "127.0.0.1:0", Root: addrs[:1], Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	c, err := client.Dial(r.Addr(), client.Options{Cred: &client.Cred{}, Durability: client.DurabilityPOSIX})
	if err != nil {
		t.Fatal(err)
	}
	return mountClient(t, c, r.Addr(), Options{AttrTimeout: DefaultAttrTimeout, EntryTimeout: DefaultEntryTimeout})
}

// TestRenameAcrossPartitionsThroughMount: through the mount, with the
// kernel caching entries and attributes as `canopy mount` lets it, a
// file and a directory tree renamed from one partition to another are
// found at once at their new names, with their contents (the moved nodes
// have new inode numbers, which the kernel must not keep using), and
// mv(1) moves a directory between partitions.
func TestRenameAcrossPartitionsThroughMount(t *testing.T) {
	f := mountPartitions(t)
	p1, p2 := filepath.Join(f.mnt, "p1"), filepath.Join(f.mnt, "p2")
	data := bytes.Repeat([]byte("canopy "), 1000)
	if err := os.WriteFile(filepath.Join(p1, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p1, "f")); err != nil { // the kernel caches its entry
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(p1, "f"), filepath.Join(p2, "g")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(p2, "g")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file at its new name: %d bytes, %v", len(got), err)
	}
	if _, err := os.Stat(filepath.Join(p1, "f")); !os.IsNotExist(err) {
		t.Fatalf("the old name: %v", err)
	}

	if err := os.MkdirAll(filepath.Join(p1, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p1, "d", "sub", "x"), data[:100], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(filepath.Join(p1, "d", "sub")); err != nil { // cached below the directory too
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(p1, "d"), filepath.Join(p2, "d")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(p2, "d", "sub", "x")); err != nil || !bytes.Equal(got, data[:100]) {
		t.Fatalf("a file of the moved directory: %d bytes, %v", len(got), err)
	}
	if ents, err := os.ReadDir(filepath.Join(p2, "d")); err != nil || len(ents) != 1 || ents[0].Name() != "sub" {
		t.Fatalf("the moved directory: %v, %v", ents, err)
	}
	if out, err := exec.Command("mv", filepath.Join(p2, "d"), filepath.Join(p1, "back")).CombinedOutput(); err != nil {
		t.Fatalf("mv: %v: %s", err, out)
	}
	if got, err := os.ReadFile(filepath.Join(p1, "back", "sub", "x")); err != nil || !bytes.Equal(got, data[:100]) {
		t.Fatalf("after mv: %d bytes, %v", len(got), err)
	}
	if _, err := os.Stat(filepath.Join(p2, "d")); !os.IsNotExist(err) {
		t.Fatalf("mv left the source: %v", err)
	}
}

// TestWorkingDirectoryFollowsAMove: a shell whose working directory is a
// directory that another client then renames to another partition keeps
// working in it, as on a local file system: it lists it, creates a file
// in it and reads a file below it, and what it made is in the directory
// at its new name. The kernel still names the directory by its old node
// id; the partition it left forwards calls for that number to the
// partition it went to (engine/forward.go).
func TestWorkingDirectoryFollowsAMove(t *testing.T) {
	f := mountPartitions(t)
	ctx := context.Background()
	work := filepath.Join(f.mnt, "p1", "work")
	if err := os.MkdirAll(filepath.Join(work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "sub", "x"), []byte("below\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.c.MkdirAll(ctx, "/p2/to", 0o755); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", "read go; ls; echo made > made; cat sub/x")
	sh.Dir = work
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer sh.Process.Kill()
	// Another client moves the shell's working directory.
	if err := f.c.Rename(ctx, "/p1/work", "/p2/to/work"); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- sh.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the shell in the moved directory: %v: %s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the shell in the moved directory did not finish: %s", out.String())
	}
	if got := out.String(); got != "sub\nbelow\n" {
		t.Fatalf("the shell printed %q", got)
	}
	got, err := f.c.ReadFile(ctx, "/p2/to/work/made")
	if err != nil || string(got) != "made\n" {
		t.Fatalf("the file the shell made, at the directory's new name: %q, %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(f.mnt, "p2", "to", "work", "made")); err != nil || string(got) != "made\n" {
		t.Fatalf("through the mount at the new name: %q, %v", got, err)
	}
}

// TestRenameJustClosedAcrossPartitions: a rename between partitions of a
// file whose last descriptor closes while the rename is on its way, as
// after `echo x > f && mv f ../other/` (the kernel sends a closed file's
// release after close(2) returns), moves it: the service refuses an open
// file (EBUSY), and the mount waits for its releases and tries again.
// Here the descriptor is closed 10 ms after the rename starts, so the
// first try finds the file open.
func TestRenameJustClosedAcrossPartitions(t *testing.T) {
	f := mountPartitions(t)
	for i := range 5 {
		from := filepath.Join(f.mnt, "p1", fmt.Sprintf("f%d", i))
		to := filepath.Join(f.mnt, "p2", fmt.Sprintf("f%d", i))
		if err := os.WriteFile(from, []byte("closing"), 0o644); err != nil {
			t.Fatal(err)
		}
		fd, err := os.Open(from)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- os.Rename(from, to) }()
		time.Sleep(10 * time.Millisecond)
		fd.Close()
		if err := <-done; err != nil {
			t.Fatalf("rename %d: %v", i, err)
		}
		if got, err := os.ReadFile(to); err != nil || string(got) != "closing" {
			t.Fatalf("moved file %d: %q, %v", i, got, err)
		}
	}
}
