package fuse

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestSnapshotOnMount: a snapshot reads at DIR/.snapshot/NAME through the
// mount with the contents it was taken with, while the directory moves
// on; every change there fails with "Read-only file system".
func TestSnapshotOnMount(t *testing.T) {
	f := mountTest(t, Options{})
	must(t, os.MkdirAll(f.path("p", "sub"), 0o755))
	must(t, os.WriteFile(f.path("p", "sub", "f"), []byte("before"), 0o644))
	if _, err := f.c.SnapshotCreate(t.Context(), "/p", "s1"); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(f.path("p", "sub", "f"), []byte("after the snapshot"), 0o644))
	must(t, os.WriteFile(f.path("p", "new"), nil, 0o644))

	got, err := os.ReadFile(f.path("p", ".snapshot", "s1", "sub", "f"))
	if err != nil || string(got) != "before" {
		t.Fatalf("snapshot file reads %q, %v", got, err)
	}
	if got, err := os.ReadFile(f.path("p", "sub", "f")); err != nil || string(got) != "after the snapshot" {
		t.Fatalf("file reads %q, %v", got, err)
	}
	ents, err := os.ReadDir(f.path("p", ".snapshot"))
	if err != nil || len(ents) != 1 || ents[0].Name() != "s1" {
		t.Fatalf(".snapshot lists %v, %v", ents, err)
	}
	if _, err := os.Stat(f.path("p", ".snapshot", "s1", "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file made after the snapshot shows in it: %v", err)
	}
	snapFile := f.path("p", ".snapshot", "s1", "sub", "f")
	for what, err := range map[string]error{
		"write":  os.WriteFile(snapFile, []byte("x"), 0o644),
		"create": os.WriteFile(f.path("p", ".snapshot", "s1", "x"), nil, 0o644),
		"mkdir":  os.Mkdir(f.path("p", ".snapshot", "s1", "d"), 0o755),
		"remove": os.Remove(snapFile),
		"rename": os.Rename(snapFile, f.path("p", "moved")),
		"chmod":  os.Chmod(snapFile, 0o600),
		"rmdir":  os.Remove(f.path("p", ".snapshot", "s1")),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s under .snapshot: %v, want EROFS", what, err)
		}
	}
	if err := f.c.SnapshotRemove(t.Context(), "/p", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.path("p", ".snapshot")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf(".snapshot after its last snapshot went: %v", err)
	}
}
