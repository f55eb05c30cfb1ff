package fuse

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// Through a mount in the POSIX mode, close commits without a log fsync
// of its own, and fsync of a file, of a file open only for reading, and
// of a directory each return after one; another client sees what was
// closed.
func TestMountDurabilityPOSIX(t *testing.T) {
	requireFUSE(t)
	srv, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}, Durability: client.DurabilityPOSIX})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := MountAt(c, mnt, Options{AttrTimeout: DefaultAttrTimeout, EntryTimeout: DefaultEntryTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer unmountBounded(t, m)

	synced := func(what string, fn func() error) {
		t.Helper()
		before := srv.Stats().Syncs
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if srv.Stats().Syncs <= before {
			t.Fatalf("%s returned before any log fsync", what)
		}
	}
	p := filepath.Join(mnt, "f")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("posix"); err != nil {
		t.Fatal(err)
	}
	synced("fsync", f.Sync)
	if _, err := f.WriteString(" mode"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if data, err := other.ReadFile(t.Context(), "/f"); err != nil || string(data) != "posix mode" {
		t.Fatalf("another client reads %q, %v", data, err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	synced("fsync of a read-only descriptor", r.Sync)
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	synced("fsync of a directory", d.Sync)
}
