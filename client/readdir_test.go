package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
	"github.com/canopyfs/canopy/internal/vfs"
)

// TestEntriesStreamsPages lists a directory of several pages through the
// iterator, checks every entry comes once in name order with its
// attributes, and that stopping early and a missing directory behave.
func TestEntriesStreamsPages(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{FS: vfs.NewMem()})
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Mkdir(ctx, "/big", 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 2500 // three pages of 1,024
	for i := range n {
		if _, err := c.Create(ctx, fmt.Sprintf("/big/f%05d", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	for e, err := range c.Entries(ctx, "/big", true) {
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("f%05d", i); e.Name() != want {
			t.Fatalf("entry %d is %q, want %q", i, e.Name(), want)
		}
		if info, err := e.Info(); err != nil || info.Mode().IsDir() {
			t.Fatalf("entry %q: info %v, %v", e.Name(), info, err)
		}
		i++
	}
	if i != n {
		t.Fatalf("listed %d entries, want %d", i, n)
	}
	seen := 0
	for _, err := range c.Entries(ctx, "/big", false) {
		if err != nil {
			t.Fatal(err)
		}
		if seen++; seen == 1500 {
			break
		}
	}
	if seen != 1500 {
		t.Fatalf("stopped after %d entries, want 1500", seen)
	}
	var gotErr error
	for e, err := range c.Entries(ctx, "/missing", false) {
		if e != nil {
			t.Fatalf("entry %q of a missing directory", e.Name())
		}
		gotErr = err
	}
	if gotErr == nil {
		t.Fatal("missing directory: no error")
	}
}
