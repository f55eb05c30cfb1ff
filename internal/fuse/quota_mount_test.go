package fuse

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestQuotaOnMount: below a directory quota, df shows the quota as the
// size and its usage as the use, and programs past a limit get "Disk quota
// exceeded".
func TestQuotaOnMount(t *testing.T) {
	f := mountTest(t, Options{})
	must(t, os.Mkdir(f.path("q"), 0o777))
	must(t, os.Mkdir(f.path("q", "sub"), 0o777))
	must(t, os.WriteFile(f.path("q", "a"), make([]byte, 5000), 0o644))
	const maxFiles, maxBytes = 5, 1 << 20
	if _, err := f.c.SetQuota(t.Context(), "/q", maxFiles, maxBytes); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	must(t, unix.Statfs(f.path("q", "sub"), &st))
	if total := st.Blocks * uint64(st.Bsize); total != maxBytes || st.Files != maxFiles || st.Files-st.Ffree != 2 {
		t.Errorf("statfs in /q/sub: %d bytes, %d inodes, %d used; want %d, %d, 2", total, st.Files, st.Files-st.Ffree, maxBytes, maxFiles)
	}
	if used := (st.Blocks - st.Bfree) * uint64(st.Bsize); used != 8192 {
		t.Errorf("statfs in /q: %d bytes used, want 8192 (5000 in 4 KiB blocks)", used)
	}
	// df(1) as an operator runs it, in the directory and at the root.
	if got := strings.TrimSpace(lastLine(run(t, "", "df", "-B1", "--output=size", f.path("q")))); got != fmt.Sprint(maxBytes) {
		t.Errorf("df -B1 in /q: size %q, want %d", got, maxBytes)
	}
	must(t, unix.Statfs(f.mnt, &st))
	if st.Files == maxFiles {
		t.Errorf("statfs at the root shows the quota: %+v", st)
	}

	// Nodes: three more fit, the next is refused.
	for i := range 3 {
		must(t, os.WriteFile(f.path("q", "sub", fmt.Sprint("f", i)), nil, 0o644))
	}
	err := os.WriteFile(f.path("q", "sub", "one-too-many"), nil, 0o644)
	if !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("sixth node: %v, want EDQUOT", err)
	}
	out, err := runErr("", "mkdir", f.path("q", "d"))
	if err == nil || !strings.Contains(out, "Disk quota exceeded") {
		t.Errorf("mkdir past the limit: %v: %s", err, out)
	}
	// Bytes: a write past the limit fails, one up to it succeeds.
	must(t, os.Remove(f.path("q", "sub", "f0")))
	err = os.WriteFile(f.path("q", "sub", "big"), make([]byte, maxBytes-5000+1), 0o644)
	if !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("write one byte past the limit: %v, want EDQUOT", err)
	}
	// A close that reports EDQUOT drops what it could not store: while
	// another descriptor keeps the file open (no release yet), an open
	// that truncates it does not try that data again (it answered EDQUOT
	// when the data stayed buffered).
	fd, err := unix.Open(f.path("q", "sub", "big"), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	must(t, err)
	_, err = unix.Write(fd, make([]byte, maxBytes-5000+1))
	must(t, err)
	held, err := unix.Dup(fd)
	must(t, err)
	closeErr := unix.Close(fd)
	err = os.WriteFile(f.path("q", "sub", "big"), make([]byte, maxBytes-5000), 0o644)
	unix.Close(held) // before any failure: a file left open keeps the mount from going
	if !errors.Is(closeErr, syscall.EDQUOT) {
		t.Errorf("close after a write past the limit: %v, want EDQUOT", closeErr)
	}
	must(t, err)
	out, err = runErr("", "truncate", "-s", fmt.Sprint(maxBytes), f.path("q", "a"))
	if err == nil || !strings.Contains(out, "Disk quota exceeded") {
		t.Errorf("truncate past the limit: %v: %s", err, out)
	}
	q, err := f.c.GetQuota(t.Context(), "/q")
	if err != nil || q.Files != maxFiles || q.Bytes != maxBytes {
		t.Errorf("quota %+v %v, want %d files %d bytes", q, err, maxFiles, maxBytes)
	}
}
