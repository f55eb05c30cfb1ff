package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// `canopy checkpoint ls` lists each checkpoint with its index, size and
// the SHA-256 of the file: equal bodies at the same index give equal
// checksums, a different body a different one.
func TestCheckpointLs(t *testing.T) {
	write := func(dir string, lsn uint64, body string) {
		t.Helper()
		err := wal.WriteCheckpoint(vfs.Default, dir, lsn, func(w io.Writer) error {
			_, err := io.WriteString(w, body)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	a, b := t.TempDir(), t.TempDir()
	write(a, 0, "empty")
	write(a, 7, "state at seven")
	write(b, 7, "state at seven")
	os.WriteFile(filepath.Join(a, "not-a-checkpoint"), []byte("x"), 0o644)

	list := func(dir string) []checkpointInfo {
		t.Helper()
		out, err := canopy(t, "127.0.0.1:1", "checkpoint", "ls", "--dir", dir, "--json")
		if err != nil {
			t.Fatalf("checkpoint ls: %v: %s", err, out)
		}
		var infos []checkpointInfo
		if err := json.Unmarshal([]byte(out), &infos); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		return infos
	}
	la, lb := list(a), list(b)
	if len(la) != 2 || la[0].Index != 0 || la[1].Index != 7 || len(lb) != 1 {
		t.Fatalf("listed %+v and %+v", la, lb)
	}
	data, err := os.ReadFile(filepath.Join(a, la[1].File))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if la[1].SHA256 != hex.EncodeToString(sum[:]) || la[1].Size != int64(len(data)) {
		t.Errorf("checkpoint 7: %+v; file has %d bytes, sha256 %x", la[1], len(data), sum)
	}
	if la[1].SHA256 != lb[0].SHA256 {
		t.Error("equal checkpoints have different checksums")
	}
	if la[0].SHA256 == la[1].SHA256 {
		t.Error("different checkpoints have the same checksum")
	}

	out, err := canopy(t, "127.0.0.1:1", "checkpoint", "ls", "--dir", b)
	if err != nil || !strings.Contains(out, "INDEX") || !strings.Contains(out, lb[0].SHA256) {
		t.Errorf("table output %q (%v)", out, err)
	}
	if _, err := canopy(t, "127.0.0.1:1", "checkpoint", "ls"); err == nil {
		t.Error("checkpoint ls without --dir succeeded")
	}
}
