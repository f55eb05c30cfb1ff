package object_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/canopyfs/canopy/internal/object"
)

// testStore runs the behaviour every Store must have. newStore returns a
// fresh, empty store for each subtest.
func testStore(t *testing.T, newStore func(t *testing.T) object.Store) {
	t.Run("PutGetWhole", func(t *testing.T) {
		s := newStore(t)
		data := pattern(1, 1000)
		mustPut(t, s, "chunks/0/0/1_0_1000", data)
		if got := mustGet(t, s, "chunks/0/0/1_0_1000", 0, -1); !bytes.Equal(got, data) {
			t.Fatalf("get: got %d bytes, want %d equal bytes", len(got), len(data))
		}
		info, err := s.Head(ctx(t), "chunks/0/0/1_0_1000")
		if err != nil {
			t.Fatal(err)
		}
		if info.Key != "chunks/0/0/1_0_1000" || info.Size != 1000 || info.Modified.IsZero() {
			t.Fatalf("head: %+v", info)
		}
		if s.String() == "" {
			t.Fatal("empty String()")
		}
	})

	t.Run("RangeReads", func(t *testing.T) {
		s := newStore(t)
		data := pattern(2, 1000)
		mustPut(t, s, "r", data)
		for _, c := range []struct {
			off, limit int64
			want       []byte
		}{
			{0, -1, data},
			{0, 1000, data},
			{0, 10, data[:10]},
			{10, -1, data[10:]},
			{500, 100, data[500:600]},
			{999, 1, data[999:]},
			{990, 100, data[990:]}, // runs past the end: cut short
			{0, 5000, data},        // likewise
			{1000, -1, nil},        // starts at the end: empty
			{1000, 10, nil},        // likewise
			{5000, 10, nil},        // starts past the end: empty
			{5000, -1, nil},        // likewise
			{0, 0, nil},            // zero length
			{500, 0, nil},          // likewise
		} {
			got := mustGet(t, s, "r", c.off, c.limit)
			if !bytes.Equal(got, c.want) {
				t.Errorf("get(%d, %d): got %d bytes, want %d", c.off, c.limit, len(got), len(c.want))
			}
		}
		_, err := s.Get(ctx(t), "r", -1, 10)
		if err == nil || !errors.Is(err, object.ErrInvalidRange) {
			t.Fatalf("negative offset: got %v, want ErrInvalidRange", err)
		}
	})

	t.Run("Missing", func(t *testing.T) {
		s := newStore(t)
		mustPut(t, s, "present", []byte("x"))
		for _, key := range []string{"absent", "a/b/c", "present/below"} {
			for _, r := range [][2]int64{{0, -1}, {0, 10}, {5, 0}, {100, -1}} {
				_, err := s.Get(ctx(t), key, r[0], r[1])
				checkNotFound(t, fmt.Sprintf("get(%q, %d, %d)", key, r[0], r[1]), err)
			}
			_, err := s.Head(ctx(t), key)
			checkNotFound(t, fmt.Sprintf("head(%q)", key), err)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		s := newStore(t)
		mustPut(t, s, "d/x", []byte("hello"))
		mustPut(t, s, "d/y", []byte("world"))
		for i := range 2 { // deleting twice is fine
			if err := s.Delete(ctx(t), "d/x"); err != nil {
				t.Fatalf("delete #%d: %v", i+1, err)
			}
		}
		if err := s.Delete(ctx(t), "never/existed"); err != nil {
			t.Fatalf("delete of a missing key: %v", err)
		}
		_, err := s.Get(ctx(t), "d/x", 0, -1)
		checkNotFound(t, "get after delete", err)
		_, err = s.Head(ctx(t), "d/x")
		checkNotFound(t, "head after delete", err)
		if got := keys(mustList(t, s, "", "", 0)); !slices.Equal(got, []string{"d/y"}) {
			t.Fatalf("list after delete: %q", got)
		}
		if got := mustGet(t, s, "d/y", 0, -1); string(got) != "world" {
			t.Fatalf("neighbour changed: %q", got)
		}
	})

	t.Run("List", func(t *testing.T) {
		s := newStore(t)
		// '-' and '.' sort before '/', so "chunks/0-x" and "chunks/0.y" come
		// before every key under "chunks/0/".
		all := []string{
			"chunks/0/0/1_0_4",
			"chunks/0/0/1_1_4",
			"chunks/0/0/10_0_4",
			"chunks/0/0/2_0_4",
			"chunks/0/1/1000_0_4",
			"chunks/0-x",
			"chunks/0.y",
			"chunks/1/0/1000000_0_4",
			"meta/a b",
			"z",
		}
		sizes := map[string]int64{}
		for i, k := range rand.New(rand.NewPCG(1, 2)).Perm(len(all)) {
			sizes[all[k]] = int64(i)
			mustPut(t, s, all[k], pattern(uint64(i), i))
		}
		sorted := slices.Clone(all)
		slices.Sort(sorted)

		list := mustList(t, s, "", "", 0)
		if got := keys(list); !slices.Equal(got, sorted) {
			t.Fatalf("list all:\n got %q\nwant %q", got, sorted)
		}
		for _, info := range list {
			if info.Size != sizes[info.Key] || info.Modified.IsZero() {
				t.Errorf("list: %+v, want size %d", info, sizes[info.Key])
			}
		}
		for _, c := range []struct {
			prefix, after string
			limit         int
			want          []string
		}{
			{"chunks/0/", "", 0, sorted[2:7]},
			{"chunks/0", "", 0, sorted[:7]}, // a string prefix, not a directory
			{"chunks/0/0/1", "", 0, []string{"chunks/0/0/10_0_4", "chunks/0/0/1_0_4", "chunks/0/0/1_1_4"}},
			{"chunks/", "chunks/0/0/1_1_4", 0, sorted[5:8]},
			{"", "chunks/0/0/2", 0, sorted[5:]}, // startAfter need not exist
			{"", "chunks/0/", 3, sorted[2:5]},
			{"", "", 1, sorted[:1]},
			{"", "z", 0, nil},
			{"nothing/", "", 0, nil},
			{"z", "", 0, []string{"z"}},
			{"", "", 100, sorted},
		} {
			got := keys(mustList(t, s, c.prefix, c.after, c.limit))
			if !slices.Equal(got, c.want) {
				t.Errorf("list(%q, %q, %d):\n got %q\nwant %q", c.prefix, c.after, c.limit, got, c.want)
			}
		}
		// Paging with startAfter = last key of the previous page.
		var paged []string
		after := ""
		for {
			page := keys(mustList(t, s, "", after, 3))
			if len(page) == 0 {
				break
			}
			paged = append(paged, page...)
			after = page[len(page)-1]
		}
		if !slices.Equal(paged, sorted) {
			t.Fatalf("paged list:\n got %q\nwant %q", paged, sorted)
		}
	})

	t.Run("ListMany", func(t *testing.T) {
		// More keys than one S3 list page holds.
		s := newStore(t)
		const n = 1100
		want := make([]string, n)
		for i := range n {
			want[i] = fmt.Sprintf("many/%d/%d", i/100, i)
		}
		parallel(t, 8, n, func(i int) error { return s.Put(ctx(t), want[i], []byte{byte(i)}) })
		slices.Sort(want)
		if got := keys(mustList(t, s, "many/", "", 0)); !slices.Equal(got, want) {
			t.Fatalf("list: got %d keys, want %d (first diff near %d)", len(got), len(want), firstDiff(got, want))
		}
		if got := keys(mustList(t, s, "many/", want[10], 1050)); !slices.Equal(got, want[11:1061]) {
			t.Fatalf("list with limit: got %d keys, want 1050", len(got))
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		s := newStore(t)
		mustPut(t, s, "o", pattern(3, 5000))
		short := []byte("short")
		mustPut(t, s, "o", short)
		if got := mustGet(t, s, "o", 0, -1); !bytes.Equal(got, short) {
			t.Fatalf("after overwrite: %q", got)
		}
		if info, err := s.Head(ctx(t), "o"); err != nil || info.Size != int64(len(short)) {
			t.Fatalf("head after overwrite: %+v, %v", info, err)
		}
		if got := keys(mustList(t, s, "", "", 0)); !slices.Equal(got, []string{"o"}) {
			t.Fatalf("list after overwrite: %q", got)
		}
	})

	t.Run("ConcurrentPuts", func(t *testing.T) {
		s := newStore(t)
		const workers, each = 8, 16
		key := func(w, i int) string { return fmt.Sprintf("c/%d/%d_%d", w, w, i) }
		parallel(t, workers, workers, func(w int) error {
			for i := range each {
				if err := s.Put(ctx(t), key(w, i), pattern(uint64(w*each+i), 4096+i)); err != nil {
					return err
				}
			}
			return nil
		})
		for w := range workers {
			for i := range each {
				if got := mustGet(t, s, key(w, i), 0, -1); !bytes.Equal(got, pattern(uint64(w*each+i), 4096+i)) {
					t.Fatalf("%s: wrong contents", key(w, i))
				}
			}
		}
		if n := len(mustList(t, s, "c/", "", 0)); n != workers*each {
			t.Fatalf("listed %d objects, want %d", n, workers*each)
		}
	})

	t.Run("ConcurrentOverwrites", func(t *testing.T) {
		// Racing writers of one key: the survivor is one whole object.
		s := newStore(t)
		const workers = 8
		parallel(t, workers, workers, func(w int) error {
			for range 4 {
				if err := s.Put(ctx(t), "same", pattern(uint64(100+w), 64<<10+w)); err != nil {
					return err
				}
			}
			return nil
		})
		got := mustGet(t, s, "same", 0, -1)
		w := len(got) - 64<<10
		if w < 0 || w >= workers || !bytes.Equal(got, pattern(uint64(100+w), 64<<10+w)) {
			t.Fatalf("torn object: %d bytes", len(got))
		}
		if got := keys(mustList(t, s, "", "", 0)); !slices.Equal(got, []string{"same"}) {
			t.Fatalf("list: %q", got)
		}
	})

	t.Run("Large", func(t *testing.T) {
		s := newStore(t)
		data := pattern(4, 9<<20)
		mustPut(t, s, "large/9MiB", data)
		if got := mustGet(t, s, "large/9MiB", 0, -1); !bytes.Equal(got, data) {
			t.Fatalf("whole: got %d bytes", len(got))
		}
		off := int64(4<<20 - 100) // across the 4 MiB mark
		if got := mustGet(t, s, "large/9MiB", off, 1<<20); !bytes.Equal(got, data[off:off+1<<20]) {
			t.Fatalf("range: got %d bytes", len(got))
		}
		if got := mustGet(t, s, "large/9MiB", 9<<20-5, -1); !bytes.Equal(got, data[9<<20-5:]) {
			t.Fatalf("tail: got %d bytes", len(got))
		}
		if info, err := s.Head(ctx(t), "large/9MiB"); err != nil || info.Size != 9<<20 {
			t.Fatalf("head: %+v, %v", info, err)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		s := newStore(t)
		mustPut(t, s, "empty", nil)
		for _, r := range [][2]int64{{0, -1}, {0, 10}, {0, 0}, {3, -1}} {
			if got := mustGet(t, s, "empty", r[0], r[1]); len(got) != 0 {
				t.Fatalf("get(%d, %d): %d bytes", r[0], r[1], len(got))
			}
		}
		info, err := s.Head(ctx(t), "empty")
		if err != nil || info.Size != 0 {
			t.Fatalf("head: %+v, %v", info, err)
		}
		list := mustList(t, s, "", "", 0)
		if len(list) != 1 || list[0].Key != "empty" || list[0].Size != 0 {
			t.Fatalf("list: %+v", list)
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		s := newStore(t)
		for _, key := range invalidKeys {
			checkInvalid(t, "put", key, s.Put(ctx(t), key, []byte("x")))
			_, err := s.Get(ctx(t), key, 0, -1)
			checkInvalid(t, "get", key, err)
			_, err = s.Head(ctx(t), key)
			checkInvalid(t, "head", key, err)
			checkInvalid(t, "delete", key, s.Delete(ctx(t), key))
		}
		if got := mustList(t, s, "", "", 0); len(got) != 0 {
			t.Fatalf("invalid puts left objects: %+v", got)
		}
	})

	t.Run("Canceled", func(t *testing.T) {
		s := newStore(t)
		c, cancel := context.WithCancel(ctx(t))
		cancel()
		if err := s.Put(c, "canceled", []byte("x")); err == nil {
			t.Fatal("put with a canceled context succeeded")
		}
		_, err := s.Head(ctx(t), "canceled")
		checkNotFound(t, "head after canceled put", err)
	})
}

var invalidKeys = []string{
	"", "/abs", "a/", "a//b", "./a", "a/./b", ".", "..", "../a", "a/../b", "a/..",
	"a\x00b", "\xff\xfe", ".canopy-tmp-123", "a/.canopy-tmp-x/b", strings.Repeat("k", object.MaxKeyLen+1),
}

func ctx(t *testing.T) context.Context { return t.Context() }

// pattern returns n reproducible pseudo-random bytes.
func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func mustPut(t testing.TB, s object.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, data); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
}

func mustGet(t testing.TB, s object.Store, key string, off, limit int64) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key, off, limit)
	if err != nil {
		t.Fatalf("get(%q, %d, %d): %v", key, off, limit, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return b
}

func mustList(t testing.TB, s object.Store, prefix, after string, limit int) []object.Info {
	t.Helper()
	l, err := s.List(context.Background(), prefix, after, limit)
	if err != nil {
		t.Fatalf("list(%q, %q, %d): %v", prefix, after, limit, err)
	}
	if !slices.IsSortedFunc(l, func(a, b object.Info) int { return strings.Compare(a.Key, b.Key) }) {
		t.Fatalf("list(%q, %q, %d) not sorted: %q", prefix, after, limit, keys(l))
	}
	return l
}

func keys(l []object.Info) []string {
	var k []string
	for _, i := range l {
		k = append(k, i.Key)
	}
	return k
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func checkNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, object.ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: got %v, want ErrNotFound (and fs.ErrNotExist)", what, err)
	}
}

func checkInvalid(t *testing.T, op, key string, err error) {
	t.Helper()
	if !errors.Is(err, object.ErrInvalidKey) || !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("%s(%q): got %v, want ErrInvalidKey", op, key, err)
	}
}

// parallel runs fn(0..n-1) on the given number of goroutines and fails the
// test with the first error.
func parallel(t *testing.T, workers, n int, fn func(i int) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d failures, first: %v", len(errs), errs[0])
	}
}
