package client_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/client"
)

// CreateOpenIno creates and opens a file in one call: the file takes
// writes whatever its mode, another client reads them after Close, the
// parent's attributes come back, and a second create of the name is
// EEXIST.
func TestCreateOpenIno(t *testing.T) {
	e := startData(t, backends[0], client.Options{Cred: &client.Cred{}})
	if _, err := e.c.Mkdir(e.ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := e.c.Stat(e.ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	f, fi, dir, err := e.c.CreateOpenIno(e.ctx, d.Ino(), "f", 0, 0o022, os.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0 || !fi.Mode().IsRegular() || dir == nil || dir.Ino() != d.Ino() {
		t.Fatalf("created %v (mode %v), parent %v", fi.Ino(), fi.Mode(), dir)
	}
	if _, err := f.Write([]byte("created and opened")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := client.Dial(e.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if b, err := other.ReadFile(e.ctx, "/d/f"); err != nil || string(b) != "created and opened" {
		t.Fatalf("another client reads %q, %v", b, err)
	}
	if _, _, _, err := e.c.CreateOpenIno(e.ctx, d.Ino(), "f", 0o644, 0, os.O_RDWR); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("second create: %v, want EEXIST", err)
	}
}
