package object_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/internal/object"
)

func newLocal(t testing.TB) (object.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := object.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestLocal(t *testing.T) {
	testStore(t, func(t *testing.T) object.Store {
		s, _ := newLocal(t)
		return s
	})
}

func TestLocalLayout(t *testing.T) {
	s, dir := newLocal(t)
	if want := "file://" + dir; s.String() != want {
		t.Fatalf("String() = %q, want %q", s.String(), want)
	}
	for i := range 10 {
		mustPut(t, s, fmt.Sprintf("chunks/0/0/%d_0_5", i), []byte("hello"))
	}
	got, err := os.ReadFile(filepath.Join(dir, "chunks", "0", "0", "3_0_5"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("object file: %q, %v", got, err)
	}
	// Successful puts leave no temporary files behind.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".canopy-tmp-") {
			return fmt.Errorf("leftover temporary file %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLocalLeftoverTempFiles(t *testing.T) {
	s, dir := newLocal(t)
	mustPut(t, s, "chunks/0/0/1_0_5", []byte("whole"))
	// What a crash between creating and renaming a temporary file leaves.
	for _, p := range []string{".canopy-tmp-crash1", "chunks/0/0/.canopy-tmp-crash2", "chunks/.canopy-tmp-3"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("torn"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A reopened store sees the same.
	s2, err := object.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []object.Store{s, s2} {
		if got := keys(mustList(t, st, "", "", 0)); !slices.Equal(got, []string{"chunks/0/0/1_0_5"}) {
			t.Fatalf("list: %q", got)
		}
		_, err := st.Head(context.Background(), "chunks/0/0/.canopy-tmp-crash2")
		if !errors.Is(err, object.ErrInvalidKey) {
			t.Fatalf("head of a temporary file: %v", err)
		}
	}
}

func TestLocalKeysStayInside(t *testing.T) {
	s, dir := newLocal(t)
	parent := filepath.Dir(dir)
	for _, key := range []string{"../escape", "/escape", "a/../../escape"} {
		if err := s.Put(context.Background(), key, []byte("x")); !errors.Is(err, object.ErrInvalidKey) {
			t.Fatalf("put %q: %v", key, err)
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "escape")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file was written outside the store: %v", err)
	}
}

func TestLocalDirectoriesAreNotObjects(t *testing.T) {
	s, dir := newLocal(t)
	ctx := context.Background()
	mustPut(t, s, "d/x", []byte("x"))
	_, err := s.Head(ctx, "d")
	checkNotFound(t, "head of a directory", err)
	_, err = s.Get(ctx, "d", 0, -1)
	checkNotFound(t, "get of a directory", err)
	if err := s.Delete(ctx, "d"); err != nil {
		t.Fatalf("delete of a directory: %v", err)
	}
	if got := mustGet(t, s, "d/x", 0, -1); string(got) != "x" {
		t.Fatalf("object below the directory: %q", got)
	}
	// One key cannot be an object and the parent of another.
	if err := s.Put(ctx, "d", []byte("y")); err == nil {
		t.Fatal("put over a directory succeeded")
	}
	if err := s.Put(ctx, "d/x/y", []byte("y")); err == nil {
		t.Fatal("put below an object succeeded")
	}
	// Symbolic links and other non-regular files are not listed.
	if err := os.Symlink(filepath.Join(dir, "d", "x"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if got := keys(mustList(t, s, "", "", 0)); !slices.Equal(got, []string{"d/x"}) {
		t.Fatalf("list: %q", got)
	}
}

func TestNewLocal(t *testing.T) {
	base := t.TempDir()
	s, err := object.NewLocal(filepath.Join(base, "a", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "k", []byte("v"))
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := object.NewLocal(file); err == nil {
		t.Fatal("NewLocal on a regular file succeeded")
	}
	if _, err := object.NewLocal(""); err == nil {
		t.Fatal("NewLocal with no directory succeeded")
	}
}

const benchSize = 4 << 20

func BenchmarkPut(b *testing.B) {
	s, _ := newLocal(b)
	data := pattern(7, benchSize)
	ctx := context.Background()
	b.SetBytes(benchSize)
	for i := 0; b.Loop(); i++ {
		// Cycle over a few keys so the benchmark's disk use stays bounded.
		if err := s.Put(ctx, fmt.Sprintf("bench/%d", i%16), data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	s, _ := newLocal(b)
	data := pattern(8, benchSize)
	ctx := context.Background()
	const objects = 16
	for i := range objects {
		mustPut(b, s, fmt.Sprintf("bench/%d", i), data)
	}
	buf := make([]byte, benchSize)
	b.SetBytes(benchSize)
	for i := 0; b.Loop(); i++ {
		rc, err := s.Get(ctx, fmt.Sprintf("bench/%d", i%objects), 0, -1)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.ReadFull(rc, buf)
		rc.Close()
		if err != nil || n != benchSize {
			b.Fatal(n, err)
		}
	}
	if !bytes.Equal(buf, data) {
		b.Fatal("wrong contents")
	}
}
