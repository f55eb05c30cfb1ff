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

// TestBackupsUnderPartitions runs canopy up --partitions 2 with backups
// every 100 ms: each partition backs itself up under meta-backup/pK/.
// Partition 1's directory is then lost and restored from the store alone
// (`canopy load --from-store --partition 1`); its files read back.
func TestBackupsUnderPartitions(t *testing.T) {
	dir := t.TempDir()
	args := []string{"up", "--dir", dir, "--listen", "127.0.0.1:0", "--partitions", "2", "--backup-interval", "100ms"}
	up := startUpArgs(t, args...)
	c, err := client.Dial(up.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	files := map[string]string{}
	for i := range 10 {
		p := fmt.Sprintf("/p1/d/f%d", i)
		if i%2 == 0 {
			p = fmt.Sprintf("/top%d", i)
		}
		if err := c.MkdirAll(ctx, filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		files[p] = strings.Repeat(p, i+1)
		if err := c.WriteFile(ctx, p, []byte(files[p]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var lsns [2]uint64
	for k := range 2 {
		st, err := c.Status(ctx, uint16(k))
		if err != nil {
			t.Fatal(err)
		}
		lsns[k] = st.LSN
	}
	c.Close()
	storeURL := "file://" + filepath.Join(dir, "objects")
	store, err := object.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		waitFor(t, fmt.Sprintf("a backup of partition %d at position %d", k, lsns[k]), func() bool {
			list, err := store.List(context.Background(), backupKeyPrefix(uint16(k)), "", 0)
			if err != nil || len(list) == 0 {
				return false
			}
			name := strings.TrimSuffix(list[len(list)-1].Key, ".dump")
			lsn, _ := strconv.ParseUint(name[strings.LastIndexByte(name, '-')+1:], 10, 64)
			return lsn >= lsns[k]
		})
	}

	up.cmd.Process.Kill()
	up.cmd.Wait()
	if err := os.RemoveAll(filepath.Join(dir, "p1")); err != nil {
		t.Fatal(err)
	}
	mustCanopy(t, "127.0.0.1:1", "load", "--dir", filepath.Join(dir, "p1"), "--from-store", storeURL, "--partition", "1")
	args[len(args)-1] = "0"
	up = startUpArgs(t, args...)
	c, err = client.Dial(up.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for p, want := range files {
		if got, err := c.ReadFile(ctx, p); err != nil || string(got) != want {
			t.Errorf("%s after restoring partition 1: %q (%v), want %q", p, got, err, want)
		}
	}
}
