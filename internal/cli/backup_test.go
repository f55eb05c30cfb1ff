package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/object"
)

// TestBackupsRestoreLostMetadata runs canopy up with backups every 100 ms,
// writes files, waits for a backup that holds them, deletes the metadata
// directory, restores it from the object store alone with
// `canopy load --from-store` and reads every file back.
func TestBackupsRestoreLostMetadata(t *testing.T) {
	dir := t.TempDir()
	up := startUpArgs(t, "up", "--dir", dir, "--listen", "127.0.0.1:0", "--backup-interval", "100ms", "--backup-keep", "3")
	c, err := client.Dial(up.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	files := map[string]string{}
	for i := range 20 {
		p := fmt.Sprintf("/d%d/f%d", i%3, i)
		if err := c.MkdirAll(ctx, filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		files[p] = strings.Repeat(fmt.Sprintf("contents of %s;", p), i+1)
		if err := c.WriteFile(ctx, p, []byte(files[p]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	storeURL := "file://" + filepath.Join(dir, "objects")
	store, err := object.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	backups := func() []object.Info {
		list, err := store.List(context.Background(), backupKeyPrefix(0), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	waitFor(t, "a backup holding every file", func() bool {
		list := backups()
		if len(list) == 0 {
			return false
		}
		name := strings.TrimSuffix(list[len(list)-1].Key, ".dump")
		lsn, _ := strconv.ParseUint(name[strings.LastIndexByte(name, '-')+1:], 10, 64)
		return lsn >= st.LSN
	})
	// A new backup is written before the oldest is removed, so a listing
	// may catch four for a moment.
	waitFor(t, "at most 3 backups kept", func() bool { return len(backups()) <= 3 })

	// The metadata server is lost with its directory.
	up.cmd.Process.Kill()
	up.cmd.Wait()
	if err := os.RemoveAll(filepath.Join(dir, "meta")); err != nil {
		t.Fatal(err)
	}
	mustCanopy(t, "127.0.0.1:1", "load", "--dir", filepath.Join(dir, "meta"), "--from-store", storeURL)
	up = startUpArgs(t, "up", "--dir", dir, "--listen", "127.0.0.1:0", "--backup-interval", "0")
	c, err = client.Dial(up.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for p, want := range files {
		got, err := c.ReadFile(ctx, p)
		if err != nil || string(got) != want {
			t.Errorf("%s after restore: %q (%v), want %q", p, got, err, want)
		}
	}
}
