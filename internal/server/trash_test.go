package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// TestTrashRemoveAllRestartRestore removes a tree with the SDK's
// RemoveAll (entry by entry, as rm -r), restarts the server from its log
// and checkpoint, and restores the trash: every file comes back with its
// mode, owner and contents.
func TestTrashRemoveAllRestartRestore(t *testing.T) {
	ctx := context.Background()
	dir, store := t.TempDir(), "file://"+t.TempDir()
	cfg := Config{Dir: dir, Storage: store, TrashDays: 1, CheckpointEvery: 7}
	s, c := serveOn(t, cfg)
	want := map[string][]byte{}
	modes := map[string]uint32{}
	for i := range 3 {
		d := fmt.Sprintf("/t/d%d", i)
		if err := c.MkdirAll(ctx, d+"/sub", 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			p := fmt.Sprintf("%s/sub/f%d", d, j)
			want[p] = bytes.Repeat([]byte{byte('a' + i), byte('0' + j)}, 1000*(j+1))
			if err := c.WriteFile(ctx, p, want[p], 0o644); err != nil {
				t.Fatal(err)
			}
			fi, err := c.Chmod(ctx, p, uint32(0o600+j))
			if err != nil {
				t.Fatal(err)
			}
			modes[p] = uint32(fi.Mode().Perm())
		}
	}
	before, err := c.Statfs(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveAll(ctx, "/t"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, "/t"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("/t after RemoveAll: %v", err)
	}
	after, err := c.Statfs(ctx, "/")
	if err != nil || after.UsedBytes != before.UsedBytes {
		t.Fatalf("used %d after RemoveAll, %d before (the trash keeps it): %v", after.UsedBytes, before.UsedBytes, err)
	}
	shutdown(t, s)

	s, c = serveOn(t, cfg)
	defer shutdown(t, s)
	tr, err := c.TrashList(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	// /t, 3 directories, 3 sub, 9 files.
	if tr.Days != 1 || tr.Files != 16 || len(tr.Entries) != 16 {
		t.Fatalf("trash after restart: %d days, %d files, %d entries", tr.Days, tr.Files, len(tr.Entries))
	}
	var total uint64
	for _, b := range want {
		total += uint64(len(b))
	}
	if tr.Bytes != total {
		t.Fatalf("trash holds %d bytes, want %d", tr.Bytes, total)
	}
	hours := map[string]bool{}
	for _, e := range tr.Entries {
		hours[e.Hour] = true
	}
	restored := 0
	for h := range hours {
		paths, failed, err := c.TrashRestore(ctx, "/", h, "")
		if err != nil || failed != "" {
			t.Fatalf("restore hour %s: %v %q", h, err, failed)
		}
		restored += len(paths)
	}
	if restored != 16 {
		t.Fatalf("restored %d paths, want 16", restored)
	}
	for p, b := range want {
		got, err := c.ReadFile(ctx, p)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s after restore: %d bytes, %v", p, len(got), err)
		}
		fi, err := c.Stat(ctx, p)
		if err != nil || uint32(fi.Mode().Perm()) != modes[p] {
			t.Fatalf("%s after restore: %v %v, want mode %o", p, fi.Mode(), err, modes[p])
		}
	}
	// A restore onto a taken name says which.
	if err := c.Remove(ctx, "/t/d0/sub/f0"); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, "/t/d0/sub/f0", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err = c.TrashList(ctx, "/")
	if err != nil || len(tr.Entries) != 1 {
		t.Fatalf("trash: %+v %v", tr, err)
	}
	_, _, err = c.TrashRestore(ctx, "/", tr.Entries[0].Hour, tr.Entries[0].Name)
	if !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("restore onto a taken name: %v", err)
	}
	if files, bytesFreed, err := c.TrashPurge(ctx, "/", 0, true); err != nil || files != 1 || bytesFreed != 1000*2 {
		t.Fatalf("purge: %d %d %v", files, bytesFreed, err)
	}
}
