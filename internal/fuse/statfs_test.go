package fuse

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
)

func TestStatfsOutRounding(t *testing.T) {
	cases := []struct {
		used, wantUsedBlocks uint64
	}{{0, 0}, {1, 1}, {4096, 1}, {4097, 2}, {10 * 4096, 10}}
	for _, c := range cases {
		out := statfsOut(client.Statfs{TotalBytes: 1 << 30, UsedBytes: c.used, TotalInodes: 100, UsedInodes: 7, BlockSize: 4096, MaxName: 255})
		if got := out.Blocks - out.Bfree; got != c.wantUsedBlocks || out.Bavail != out.Bfree {
			t.Errorf("used %d bytes: %d blocks used (bavail %d bfree %d), want %d", c.used, got, out.Bavail, out.Bfree, c.wantUsedBlocks)
		}
		if out.Files != 100 || out.Ffree != 93 {
			t.Errorf("files %d free %d, want 100 and 93", out.Files, out.Ffree)
		}
	}
	// More used than the total (a nominal total too small) shows full,
	// not a wrapped-around free count.
	out := statfsOut(client.Statfs{TotalBytes: 4096, UsedBytes: 1 << 20, TotalInodes: 1, UsedInodes: 5})
	if out.Bfree != 0 || out.Ffree != 0 {
		t.Errorf("over-full: bfree %d ffree %d", out.Bfree, out.Ffree)
	}
}

// TestDfOnMount checks that df and df -i on a real mount count every
// inode the tree holds and the bytes of its files.
func TestDfOnMount(t *testing.T) {
	f := mountTest(t, Options{})
	must(t, os.Mkdir(f.path("d"), 0o755))
	must(t, os.Mkdir(f.path("d", "e"), 0o755))
	const files = 40
	for i := range files {
		must(t, os.WriteFile(f.path("d", fmt.Sprint("f", i)), []byte(strings.Repeat("x", i)), 0o644))
	}
	must(t, os.Symlink("d/f1", f.path("sym")))
	must(t, os.Link(f.path("d", "f2"), f.path("hard"))) // no new inode
	must(t, os.WriteFile(f.path("big"), make([]byte, 3*4096+1), 0o644))
	wantInodes := uint64(1 + 2 + files + 1 + 1) // root, d, d/e, the files, sym, big
	wantBytes := uint64(files*(files-1)/2 + 3*4096 + 1)

	var st unix.Statfs_t
	must(t, unix.Statfs(f.mnt, &st))
	if used := st.Files - st.Ffree; used != wantInodes {
		t.Errorf("statfs: %d inodes used, want %d", used, wantInodes)
	}
	wantBlocks := (wantBytes + 4095) / 4096
	if used := st.Blocks - st.Bfree; used != wantBlocks {
		t.Errorf("statfs: %d blocks used, want %d (%d bytes)", used, wantBlocks, wantBytes)
	}
	s, err := f.c.Statfs(t.Context(), "/")
	must(t, err)
	if s.UsedInodes != wantInodes || s.UsedBytes != wantBytes {
		t.Errorf("server: %d inodes %d bytes used, want %d and %d", s.UsedInodes, s.UsedBytes, wantInodes, wantBytes)
	}

	// df(1) itself, as an operator runs it (--output=iused is df -i's IUsed).
	fields := strings.Fields(lastLine(run(t, "", "df", "--output=iused", f.mnt)))
	if len(fields) != 1 || fields[0] != strconv.FormatUint(wantInodes, 10) {
		t.Errorf("df -i: IUsed %q, want %d", fields, wantInodes)
	}
	fields = strings.Fields(lastLine(run(t, "", "df", "-B1", "--output=used", f.mnt)))
	if len(fields) != 1 || fields[0] != strconv.FormatUint(wantBlocks*4096, 10) {
		t.Errorf("df -B1: Used %q, want %d", fields, wantBlocks*4096)
	}

	// Removing files gives their inodes and bytes back.
	must(t, os.Remove(f.path("big")))
	must(t, os.Remove(f.path("sym")))
	must(t, unix.Statfs(f.mnt, &st))
	if used := st.Files - st.Ffree; used != wantInodes-2 {
		t.Errorf("after removes: %d inodes used, want %d", used, wantInodes-2)
	}
	if used := st.Blocks - st.Bfree; used != (wantBytes-3*4096-1+4095)/4096 {
		t.Errorf("after removes: %d blocks used", used)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
