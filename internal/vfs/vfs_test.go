package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
)

// The same suite runs against every FS, so that MemFS behaves like the
// operating system wherever storage code can tell the difference.

func TestDiskFS(t *testing.T) {
	testFS(t, func(t *testing.T) (FS, string) { return Default, t.TempDir() })
}

func TestMemFS(t *testing.T) {
	testFS(t, func(t *testing.T) (FS, string) {
		m := NewMem()
		if err := m.MkdirAll("/data"); err != nil {
			t.Fatal(err)
		}
		return m, "/data"
	})
}

func TestFaultyFSPassesThrough(t *testing.T) {
	testFS(t, func(t *testing.T) (FS, string) {
		return NewFaulty(NewMem(), func(Op, string) error { return nil }), "data"
	})
}

func testFS(t *testing.T, newFS func(t *testing.T) (FS, string)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, fsys FS, dir string)
	}{
		{"CreateWriteRead", testCreateWriteRead},
		{"CreateTruncates", testCreateTruncates},
		{"OpenWriteAt", testOpenWriteAt},
		{"NotExist", testNotExist},
		{"Remove", testRemove},
		{"Rename", testRename},
		{"MkdirAllReadDir", testMkdirAllReadDir},
		{"SyncDir", testSyncDir},
		{"SizeTruncate", testSizeTruncate},
		{"FileModes", testFileModes},
		{"Closed", testClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, dir := newFS(t)
			if err := fsys.MkdirAll(dir); err != nil {
				t.Fatal(err)
			}
			tt.fn(t, fsys, dir)
		})
	}
}

func writeFile(t *testing.T, fsys FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, fsys FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func testCreateWriteRead(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	want := bytes.Repeat([]byte("0123456789"), 1000)
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	for chunk := range slices.Chunk(want, 333) {
		if n, err := f.Write(chunk); err != nil || n != len(chunk) {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(chunk))
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, name); !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(want))
	}

	// Small reads see the file in order and end with io.EOF.
	r, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 7)
	var got []byte
	for {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes in small reads, want %d", len(got), len(want))
	}
}

func testCreateTruncates(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	writeFile(t, fsys, name, []byte("a long first version"))
	writeFile(t, fsys, name, []byte("short"))
	if got := readFile(t, fsys, name); string(got) != "short" {
		t.Fatalf("after second Create: %q, want %q", got, "short")
	}
}

// testOpenWriteAt: OpenWrite keeps the contents, Write starts at 0,
// WriteAt writes where it is told (past the end too), and Datasync keeps
// what was written.
func testOpenWriteAt(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	writeFile(t, fsys, name, []byte("0123456789"))
	f, err := fsys.OpenWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XY"), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), 12); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("c")); err != nil { // WriteAt did not move the offset
		t.Fatal(err)
	}
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := string(readFile(t, fsys, name)), "abc34XY789\x00\x00end"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func testNotExist(t *testing.T, fsys FS, dir string) {
	missing := filepath.Join(dir, "missing")
	checks := map[string]error{}
	_, checks["Open"] = fsys.Open(missing)
	_, checks["Size"] = fsys.Size(missing)
	_, checks["ReadDir"] = fsys.ReadDir(missing)
	_, checks["Create in missing dir"] = fsys.Create(filepath.Join(missing, "f"))
	_, checks["OpenWrite"] = fsys.OpenWrite(missing)
	checks["Remove"] = fsys.Remove(missing)
	checks["Rename"] = fsys.Rename(missing, filepath.Join(dir, "other"))
	checks["Truncate"] = fsys.Truncate(missing, 0)
	checks["SyncDir"] = fsys.SyncDir(missing)
	for op, err := range checks {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s of missing file: err = %v, want fs.ErrNotExist", op, err)
		}
	}
}

func testRemove(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	writeFile(t, fsys, name, []byte("x"))
	if err := fsys.Remove(name); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Open(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open after Remove: err = %v, want fs.ErrNotExist", err)
	}

	sub := filepath.Join(dir, "sub")
	if err := fsys.MkdirAll(sub); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fsys, filepath.Join(sub, "f"), []byte("x"))
	if err := fsys.Remove(sub); err == nil {
		t.Fatal("Remove of a non-empty directory succeeded")
	}
	if err := fsys.Remove(filepath.Join(sub, "f")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(sub); err != nil {
		t.Fatalf("Remove of an empty directory: %v", err)
	}
}

func testRename(t *testing.T, fsys FS, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, fsys, a, []byte("A"))
	writeFile(t, fsys, b, []byte("B"))
	if err := fsys.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, b); string(got) != "A" {
		t.Fatalf("after Rename over b: b = %q, want %q", got, "A")
	}
	if _, err := fsys.Open(a); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of renamed-away name: err = %v, want fs.ErrNotExist", err)
	}

	sub := filepath.Join(dir, "sub")
	if err := fsys.MkdirAll(sub); err != nil {
		t.Fatal(err)
	}
	c := filepath.Join(sub, "c")
	if err := fsys.Rename(b, c); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, c); string(got) != "A" {
		t.Fatalf("after Rename into sub: %q, want %q", got, "A")
	}
}

func testMkdirAllReadDir(t *testing.T, fsys FS, dir string) {
	deep := filepath.Join(dir, "x", "y", "z")
	for range 2 { // the second call finds everything in place
		if err := fsys.MkdirAll(deep); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"c", "a", "b"} {
		writeFile(t, fsys, filepath.Join(dir, name), nil)
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "x"}; !slices.Equal(names, want) {
		t.Fatalf("ReadDir = %q, want %q", names, want)
	}
	names, err = fsys.ReadDir(deep)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 0 {
		t.Fatalf("ReadDir of a new directory = %q, want none", names)
	}

	file := filepath.Join(dir, "a")
	if err := fsys.MkdirAll(filepath.Join(file, "below")); err == nil {
		t.Fatal("MkdirAll below a file succeeded")
	}
}

func testSyncDir(t *testing.T, fsys FS, dir string) {
	writeFile(t, fsys, filepath.Join(dir, "f"), []byte("x"))
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

func testSizeTruncate(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	writeFile(t, fsys, name, []byte("0123456789"))
	if size, err := fsys.Size(name); err != nil || size != 10 {
		t.Fatalf("Size = %d, %v; want 10, nil", size, err)
	}
	if err := fsys.Truncate(name, 4); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, name); string(got) != "0123" {
		t.Fatalf("after Truncate to 4: %q", got)
	}
	if err := fsys.Truncate(name, 6); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, name); string(got) != "0123\x00\x00" {
		t.Fatalf("after Truncate up to 6: %q", got)
	}

	// A write at the new end after a truncation extends from there.
	f, err := fsys.OpenWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Truncate(name, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("xy"), 2); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, name); string(got) != "01xy" {
		t.Fatalf("write at 2 after Truncate to 2: %q, want %q", got, "01xy")
	}
}

func testFileModes(t *testing.T, fsys FS, dir string) {
	name := filepath.Join(dir, "f")
	w, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Read(make([]byte, 1)); err == nil {
		t.Error("Read from a file opened by Create succeeded")
	}
	r, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Write([]byte("x")); err == nil {
		t.Error("Write to a file opened by Open succeeded")
	}
}

func testClosed(t *testing.T, fsys FS, dir string) {
	f, err := fsys.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("Write after Close: err = %v, want fs.ErrClosed", err)
	}
	if err := f.Sync(); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("Sync after Close: err = %v, want fs.ErrClosed", err)
	}
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("second Close: err = %v, want fs.ErrClosed", err)
	}
}
