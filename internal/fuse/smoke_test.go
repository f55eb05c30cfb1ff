package fuse

import (
	"os"
	"testing"
)

func TestSmoke(t *testing.T) {
	f := mountTest(t, Options{})
	if err := os.Mkdir(f.path("a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path("a", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(run(t, f.mnt, "ls", "-la", f.mnt, f.path("a")))
	fi, err := f.c.Stat(t.Context(), "/a/f")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(fi.Mode(), fi.Size())
}
