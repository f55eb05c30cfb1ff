package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/client"
)

// TestQuotaConcurrentWriters: 16 writers creating files and writing data
// under one directory quota through a real server never take it past its
// limits by one file or one byte, and fill it exactly.
func TestQuotaConcurrentWriters(t *testing.T) {
	e := startData(t, backends[0], client.Options{})
	c, ctx := e.c, e.ctx
	if _, err := c.Mkdir(ctx, "/q", 0o777); err != nil {
		t.Fatal(err)
	}
	const maxFiles, maxBytes = 100, 50_000
	if _, err := c.SetQuota(ctx, "/q", maxFiles, 0); err != nil {
		t.Fatal(err)
	}
	names := createUntilFull(t, ctx, c, "/q")
	if len(names) != maxFiles {
		t.Fatalf("made %d files under a limit of %d", len(names), maxFiles)
	}
	q, err := c.GetQuota(ctx, "/q")
	if err != nil || q.Files != maxFiles {
		t.Fatalf("quota %+v %v, want %d files", q, err, maxFiles)
	}

	// Bytes: the files get data, 16 writers at once, 700 bytes a write.
	if _, err := c.SetQuota(ctx, "/q", 0, maxBytes); err != nil {
		t.Fatal(err)
	}
	written := fillUntilFull(t, ctx, c, names, 700)
	q, err = c.GetQuota(ctx, "/q")
	if err != nil {
		t.Fatal(err)
	}
	if q.Bytes > maxBytes || uint64(written) != q.Bytes || written != maxBytes/700*700 {
		t.Fatalf("%d bytes written, quota %+v, limit %d", written, q, maxBytes)
	}
	sum, err := c.Summary(ctx, "/q")
	if err != nil || sum.Bytes != q.Bytes || sum.Files != q.Files {
		t.Fatalf("summary %+v %v, quota %+v", sum, err, q)
	}
	// What is left fits exactly in a file the writers filled (which files
	// they filled depends on their order): one byte more does not.
	full := filledFile(t, ctx, c, names, 700)
	left := maxBytes - q.Bytes
	if err := c.WriteFile(ctx, full, make([]byte, 700+left+1), 0o644); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("write of one byte past the limit: %v", err)
	}
	if err := c.WriteFile(ctx, full, make([]byte, 700+left), 0o644); err != nil {
		t.Fatalf("write up to the limit: %v", err)
	}
	n, bad, err := c.CheckQuotas(ctx, "/", false)
	if err != nil || n != 1 || len(bad) != 0 {
		t.Fatalf("check: %d quotas, %v, %v", n, bad, err)
	}
	s, err := c.Statfs(ctx, "/q")
	if err != nil || s.TotalBytes != maxBytes || s.UsedBytes != maxBytes {
		t.Fatalf("statfs in /q: %+v %v", s, err)
	}
}

// TestOwnerQuotaConcurrentWriters: 16 writers creating files and writing
// data under a user quota on their uid through a real server never take
// it past its limits by one file or one byte, and fill it exactly.
func TestOwnerQuotaConcurrentWriters(t *testing.T) {
	e := startData(t, backends[0], client.Options{})
	c, ctx := e.c, e.ctx
	if _, err := c.Mkdir(ctx, "/u", 0o777); err != nil {
		t.Fatal(err)
	}
	q, err := c.SetOwnerQuota(ctx, "/", client.QuotaUser, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	const newFiles, maxBytes = 100, 50_000
	maxFiles := q.Files + newFiles
	if _, err := c.SetOwnerQuota(ctx, "/", client.QuotaUser, 0, maxFiles, 0); err != nil {
		t.Fatal(err)
	}
	names := createUntilFull(t, ctx, c, "/u")
	if len(names) != newFiles {
		t.Fatalf("made %d files under room for %d", len(names), newFiles)
	}
	if q, err = c.GetOwnerQuota(ctx, "/", client.QuotaUser, 0); err != nil || q.Files != maxFiles {
		t.Fatalf("quota %+v %v, want %d files", q, err, maxFiles)
	}

	if _, err := c.SetOwnerQuota(ctx, "/", client.QuotaUser, 0, 0, maxBytes); err != nil {
		t.Fatal(err)
	}
	written := fillUntilFull(t, ctx, c, names, 700)
	q, err = c.GetOwnerQuota(ctx, "/", client.QuotaUser, 0)
	if err != nil {
		t.Fatal(err)
	}
	if q.Bytes > maxBytes || uint64(written) != q.Bytes || written != maxBytes/700*700 {
		t.Fatalf("%d bytes written, quota %+v, limit %d", written, q, maxBytes)
	}
	// A file the writers filled takes what is left exactly, not one byte
	// more.
	full := filledFile(t, ctx, c, names, 700)
	left := maxBytes - q.Bytes
	if err := c.WriteFile(ctx, full, make([]byte, 700+left+1), 0o644); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("write of one byte past the limit: %v", err)
	}
	if err := c.WriteFile(ctx, full, make([]byte, 700+left), 0o644); err != nil {
		t.Fatalf("write up to the limit: %v", err)
	}
	n, bad, err := c.CheckOwnerQuotas(ctx, "/", false)
	if err != nil || n != 1 || len(bad) != 0 {
		t.Fatalf("check: %d quotas, %v, %v", n, bad, err)
	}
}

// filledFile returns the first of names that holds size bytes.
func filledFile(t *testing.T, ctx context.Context, c *client.Client, names []string, size int64) string {
	t.Helper()
	for _, p := range names {
		if a, err := c.Stat(ctx, p); err == nil && a.Size() == size {
			return p
		}
	}
	t.Fatalf("none of %d files holds %d bytes", len(names), size)
	return ""
}

// createUntilFull has 16 writers create files in dir until each is
// refused with EDQUOT, and returns the paths made; any other error fails
// the test.
func createUntilFull(t *testing.T, ctx context.Context, c *client.Client, dir string) []string {
	t.Helper()
	var mu sync.Mutex
	var made []string
	var other []error
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				p := fmt.Sprintf("%s/w%d-%d", dir, w, i)
				_, err := c.Create(ctx, p, 0o644)
				mu.Lock()
				switch {
				case err == nil:
					made = append(made, p)
				case !errors.Is(err, syscall.EDQUOT):
					other = append(other, err)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("creates in %s: %v", dir, other)
	}
	return made
}

// fillUntilFull has 16 writers write size bytes into each of the files
// names, taking them in turn, and returns the bytes written; a write
// refused with EDQUOT writes nothing, any other error fails the test.
func fillUntilFull(t *testing.T, ctx context.Context, c *client.Client, names []string, size int) int {
	t.Helper()
	var mu sync.Mutex
	written := 0
	var other []error
	data := make([]byte, size)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < len(names); i += 16 {
				err := c.WriteFile(ctx, names[i], data, 0o644)
				mu.Lock()
				switch {
				case err == nil:
					written += size
				case !errors.Is(err, syscall.EDQUOT):
					other = append(other, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("writes: %v", other)
	}
	return written
}
