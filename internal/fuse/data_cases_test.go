package fuse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// dataCases are the cases on file contents.
func dataCases() []posixCase {
	return []posixCase{
		{"write_read", testWriteRead},
		{"append", testAppend},
		{"o_trunc", testOTrunc},
		{"o_excl", testOExcl},
		{"truncate", testTruncate},
		{"sparse", testSparse},
		{"overwrite_middle", testOverwrite},
		{"fsync_visible", testFsyncVisible},
		{"unlinked_open", testUnlinkedOpen},
		{"size_while_writing", testSizeWhileWriting},
		{"cp_diff_tar_contents", testCopyTreeContents},
		{"sqlite", testSqlite},
		{"utimes_before_close", testUtimesBeforeClose},
	}
}

// randomBytes returns n reproducible pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// sdkRead reads a file's contents from the server and the object store,
// past the kernel's page cache.
func (f *fixture) sdkRead(t *testing.T, p string) []byte {
	t.Helper()
	file, err := f.c.Open(t.Context(), f.rel(p))
	if err != nil {
		t.Fatalf("server open %s: %v", f.rel(p), err)
	}
	defer file.Close()
	b, err := io.ReadAll(file)
	if err != nil {
		t.Fatalf("server read %s: %v", f.rel(p), err)
	}
	return b
}

// sameBytes fails with the first difference.
func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Errorf("%s: %d bytes, want %d; first difference at byte %d", what, len(got), len(want), i)
}

func testWriteRead(t *testing.T, f *fixture, dir string) {
	for i, n := range []int{1, 4095, 4097, 1<<20 + 7, 9<<20 + 3} {
		p := filepath.Join(dir, itoa(n))
		want := randomBytes(n, uint64(i))
		must(t, os.WriteFile(p, want, 0o644))
		got, err := os.ReadFile(p)
		must(t, err)
		sameBytes(t, "read through the mount", got, want)
		sameBytes(t, "read from the server", f.sdkRead(t, p), want)
		if st := lstat(t, p); st.Size != int64(n) || st.Blocks < int64(n)/512 {
			t.Errorf("%d bytes: size %d, blocks %d", n, st.Size, st.Blocks)
		}
	}
}

func testAppend(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "log")
	var want []byte
	for i := range 5 {
		fd, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		must(t, err)
		line := []byte(strings.Repeat(string(rune('a'+i)), 1000*(i+1)) + "\n")
		_, err = fd.Write(line)
		must(t, err)
		_, err = fd.WriteAt([]byte("x"), 0) // refused with O_APPEND by Go; must not land
		if err == nil {
			t.Errorf("WriteAt on an O_APPEND file succeeded")
		}
		must(t, fd.Close())
		want = append(want, line...)
	}
	sameBytes(t, "appended", f.sdkRead(t, p), want)
	// Two descriptors appending in turn.
	a, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	b, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	for i := range 4 {
		fd := a
		if i%2 == 1 {
			fd = b
		}
		_, err := fd.Write([]byte{byte('0' + i)})
		must(t, err)
		want = append(want, byte('0'+i))
	}
	must(t, a.Close())
	must(t, b.Close())
	got, err := os.ReadFile(p)
	must(t, err)
	sameBytes(t, "two appenders, through the mount", got, want)
	sameBytes(t, "two appenders, server", f.sdkRead(t, p), want)
}

func testOTrunc(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, randomBytes(100000, 1), 0o644))
	must(t, os.WriteFile(p, []byte("short"), 0o644)) // O_TRUNC
	got, err := os.ReadFile(p)
	must(t, err)
	sameBytes(t, "after O_TRUNC", got, []byte("short"))
	sameBytes(t, "after O_TRUNC, server", f.sdkRead(t, p), []byte("short"))
	fd, err := os.OpenFile(p, os.O_RDWR|os.O_TRUNC, 0)
	must(t, err)
	must(t, fd.Close())
	if a := f.sdkStat(t, p); a.Size != 0 {
		t.Errorf("O_TRUNC without writing: size %d", a.Size)
	}
}

func testOExcl(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	fd, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	must(t, err)
	_, err = fd.Write([]byte("first"))
	must(t, err)
	must(t, fd.Close())
	_, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	wantErrno(t, "O_EXCL again", err, syscall.EEXIST)
	sameBytes(t, "contents kept", f.sdkRead(t, p), []byte("first"))
}

func testTruncate(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	data := randomBytes(300000, 2)
	must(t, os.WriteFile(p, data, 0o644))
	must(t, os.Truncate(p, 1000))
	sameBytes(t, "shrunk", f.sdkRead(t, p), data[:1000])
	must(t, os.Truncate(p, 5000))
	want := append(append([]byte{}, data[:1000]...), make([]byte, 4000)...)
	got, err := os.ReadFile(p)
	must(t, err)
	sameBytes(t, "grown, through the mount", got, want)
	sameBytes(t, "grown, server", f.sdkRead(t, p), want)
	// ftruncate on a descriptor with buffered writes past the new end.
	fd, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	_, err = fd.WriteAt(randomBytes(10000, 3), 2000)
	must(t, err)
	must(t, fd.Truncate(3000))
	_, err = fd.WriteAt([]byte("tail"), 3000)
	must(t, err)
	must(t, fd.Close())
	got = f.sdkRead(t, p)
	if len(got) != 3004 || string(got[3000:]) != "tail" || !bytes.Equal(got[2000:3000], randomBytes(10000, 3)[:1000]) {
		t.Errorf("ftruncate with buffered writes: %d bytes", len(got))
	}
}

func testSparse(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "sparse")
	fd, err := os.Create(p)
	must(t, err)
	const far = 70 << 20 // past the first 64 MiB chunk
	_, err = fd.WriteAt([]byte("start"), 0)
	must(t, err)
	_, err = fd.WriteAt([]byte("end"), far)
	must(t, err)
	must(t, fd.Close())
	if st := lstat(t, p); st.Size != far+3 {
		t.Errorf("size %d, want %d", st.Size, far+3)
	}
	fd, err = os.Open(p)
	must(t, err)
	defer fd.Close()
	hole := make([]byte, 1<<20)
	for _, off := range []int64{5, 1 << 20, 64<<20 - 1000, far - 1<<20} {
		n, err := fd.ReadAt(hole, off)
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		if !bytes.Equal(hole[:n], make([]byte, n)) {
			t.Errorf("hole at %d reads non-zero bytes", off)
		}
	}
	tail := make([]byte, 10)
	n, _ := fd.ReadAt(tail, far-2)
	if string(tail[:n]) != "\x00\x00end" {
		t.Errorf("around the far write: %q", tail[:n])
	}
	if a := f.sdkStat(t, p); a.Size != far+3 {
		t.Errorf("server size %d", a.Size)
	}
}

func testOverwrite(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	want := randomBytes(5<<20, 4)
	must(t, os.WriteFile(p, want, 0o644))
	fd, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	patch := randomBytes(100000, 5)
	_, err = fd.WriteAt(patch, 4<<20-50000) // across a block boundary
	must(t, err)
	copy(want[4<<20-50000:], patch)
	// Read back through the same descriptor before closing.
	got := make([]byte, len(patch))
	_, err = fd.ReadAt(got, 4<<20-50000)
	must(t, err)
	sameBytes(t, "read back before close", got, patch)
	must(t, fd.Close())
	sameBytes(t, "overwritten, server", f.sdkRead(t, p), want)
}

func testFsyncVisible(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	fd, err := os.Create(p)
	must(t, err)
	defer fd.Close()
	_, err = fd.Write([]byte("durable"))
	must(t, err)
	must(t, fd.Sync())
	sameBytes(t, "after fsync, before close", f.sdkRead(t, p), []byte("durable"))
}

func testUnlinkedOpen(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	want := randomBytes(3<<20, 6)
	// Written by the SDK, so the kernel has none of it cached.
	file, err := f.c.OpenFile(t.Context(), f.rel(p), os.O_CREATE|os.O_WRONLY, 0o644)
	must(t, err)
	_, err = file.Write(want)
	must(t, err)
	must(t, file.Close())
	fd, err := os.Open(p)
	must(t, err)
	defer fd.Close()
	must(t, os.Remove(p))
	if _, err := f.c.Lstat(t.Context(), f.rel(p)); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("still listed after unlink: %v", err)
	}
	got, err := io.ReadAll(fd)
	must(t, err)
	sameBytes(t, "read after unlink", got, want)
	var st syscall.Stat_t
	must(t, syscall.Fstat(int(fd.Fd()), &st))
	if st.Nlink != 0 || st.Size != int64(len(want)) {
		t.Errorf("fstat after unlink: nlink %d size %d", st.Nlink, st.Size)
	}
}

func testSizeWhileWriting(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	fd, err := os.Create(p)
	must(t, err)
	defer fd.Close()
	_, err = fd.Write(randomBytes(100000, 7))
	must(t, err)
	// A second open (and its stat) sees the buffered length.
	other, err := os.Open(p)
	must(t, err)
	defer other.Close()
	var st syscall.Stat_t
	must(t, syscall.Fstat(int(other.Fd()), &st))
	if st.Size != 100000 {
		t.Errorf("size seen while writing: %d", st.Size)
	}
}

// contentTree makes files of several sizes, empty ones, directories and
// a symlink below root.
func contentTree(t *testing.T, root string) {
	must(t, os.MkdirAll(filepath.Join(root, "a/b"), 0o755))
	must(t, os.Mkdir(filepath.Join(root, "empty"), 0o700))
	for i, n := range []int{0, 1, 511, 4096, 65537, 1<<20 + 1, 6 << 20} {
		dir := "a"
		if i%2 == 1 {
			dir = "a/b"
		}
		must(t, os.WriteFile(filepath.Join(root, dir, "f"+itoa(n)), randomBytes(n, uint64(100+i)), 0o640))
	}
	must(t, os.Symlink("a/b", filepath.Join(root, "link")))
}

func testCopyTreeContents(t *testing.T, f *fixture, dir string) {
	src := t.TempDir()
	contentTree(t, src)
	dst := filepath.Join(dir, "copy")
	run(t, dir, "cp", "-a", src, dst)
	run(t, dir, "diff", "-r", "--no-dereference", src, dst)
	want, err := os.ReadFile(filepath.Join(src, "a", "f"+itoa(6<<20)))
	must(t, err)
	sameBytes(t, "copied file, server", f.sdkRead(t, filepath.Join(dst, "a", "f"+itoa(6<<20))), want)
	tarball := filepath.Join(t.TempDir(), "t.tar")
	run(t, dst, "tar", "-cf", tarball, ".")
	out := t.TempDir()
	run(t, out, "tar", "-xpf", tarball)
	run(t, dir, "diff", "-r", "--no-dereference", src, out)
	back := filepath.Join(dir, "untar")
	must(t, os.Mkdir(back, 0o755))
	run(t, back, "tar", "-xpf", tarball)
	run(t, dir, "diff", "-r", "--no-dereference", src, back)
}

func testSqlite(t *testing.T, f *fixture, dir string) {
	bin, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("skipped: no sqlite3 (apt-get install -y sqlite3)")
	}
	db := filepath.Join(dir, "test.db")
	// 10,000 rows in ten transactions (each a rollback journal created,
	// written, synced and deleted, under sqlite's fcntl locks, which go to
	// the service), then a delete, a VACUUM and the integrity check.
	var script strings.Builder
	script.WriteString("PRAGMA journal_mode=DELETE;\nCREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);\n")
	for tx := range 10 {
		fmt.Fprintf(&script, `BEGIN;
WITH RECURSIVE n(i) AS (SELECT %d UNION ALL SELECT i+1 FROM n WHERE i < %d)
INSERT INTO t(id, v) SELECT i, printf('row %%d %%s', i, hex(randomblob(40))) FROM n;
COMMIT;
`, tx*1000+1, tx*1000+1000)
	}
	script.WriteString(`SELECT count(*) FROM t;
DELETE FROM t WHERE id % 3 = 0;
VACUUM;
SELECT count(*) FROM t;
PRAGMA integrity_check;`)
	cmd := exec.Command(bin, db)
	cmd.Stdin = strings.NewReader(script.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) < 3 || got[len(got)-3] != "10000" || got[len(got)-2] != "6667" || got[len(got)-1] != "ok" {
		t.Errorf("sqlite3 printed %q, want the counts 10000 and 6667 and ok", out)
	}
	// The server's copy is a valid database too.
	local := filepath.Join(t.TempDir(), "copy.db")
	must(t, os.WriteFile(local, f.sdkRead(t, db), 0o644))
	out, err = exec.Command(bin, local, "SELECT count(*) FROM t; PRAGMA integrity_check;").CombinedOutput()
	if err != nil || strings.Join(strings.Fields(string(out)), " ") != "6667 ok" {
		t.Errorf("server's copy: %v %q", err, out)
	}
}

var _ = unix.O_RDONLY

// testUtimesBeforeClose sets a file's times through its descriptor after
// writing and before closing it, as tar -x and cp -p do: the times set
// stay, the commit of the buffered writes at close does not replace them.
func testUtimesBeforeClose(t *testing.T, f *fixture, dir string) {
	p := filepath.Join(dir, "f")
	fd, err := os.Create(p)
	must(t, err)
	_, err = fd.Write(randomBytes(100000, 7))
	must(t, err)
	when := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	ts := []unix.Timespec{unix.NsecToTimespec(when.UnixNano()), unix.NsecToTimespec(when.UnixNano())}
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd.Fd()), ts, 0))
	must(t, fd.Close())
	if a := f.sdkStat(t, p); !a.Mtime.Equal(when) || a.Size != 100000 {
		t.Errorf("server: mtime %v size %d, want %v and 100000", a.Mtime.UTC(), a.Size, when)
	}
	st := lstat(t, p)
	if got := time.Unix(st.Mtim.Unix()); !got.Equal(when) {
		t.Errorf("mount: mtime %v, want %v", got.UTC(), when)
	}
}
