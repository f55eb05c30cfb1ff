package fuse

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// TestFreshDirectoryThroughTheMount fills a directory made through a
// mount with a NegativeTimeout: the kernel's LOOKUPs of the new names are answered by the mount
// (no LOOKUP reaches the service), the files made are found again once
// the kernel has forgotten its entries, and a file another client made
// there meanwhile is opened, not refused, by an open(2) with O_CREAT and
// without O_EXCL (with O_EXCL: EEXIST).
func TestFreshDirectoryThroughTheMount(t *testing.T) {
	opts := DefaultOptions()
	opts.NegativeTimeout = time.Minute // the directory stays fresh for the whole test
	f, calls, _ := countingMount(t, opts)
	must(t, os.Mkdir(f.path("d"), 0o755))
	const files = 20
	before := calls.counts(t)["lookup"]
	for i := range files {
		must(t, os.WriteFile(f.path("d", fmt.Sprint("f", i)), []byte(fmt.Sprint("file ", i)), 0o644))
	}
	if n := calls.counts(t)["lookup"] - before; n != 0 {
		t.Errorf("%v LOOKUPs reached the service while a fresh directory was filled", n)
	}

	// The kernel forgets its entries: the names come back from the service.
	if os.Geteuid() == 0 {
		must(t, os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0))
	}
	for i := range files {
		b, err := os.ReadFile(f.path("d", fmt.Sprint("f", i)))
		if err != nil || string(b) != fmt.Sprint("file ", i) {
			t.Fatalf("f%d read back %q, %v", i, b, err)
		}
	}

	// Another client makes a file in the directory.
	other, err := client.Dial(f.addr, client.Options{Cred: &client.Cred{}})
	must(t, err)
	defer other.Close()
	must(t, other.WriteFile(t.Context(), "/d/theirs", []byte("theirs"), 0o644))
	_, err = os.OpenFile(f.path("d", "theirs"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_CREAT|O_EXCL of a name another client made: %v, want EEXIST", err)
	}
	w, err := os.OpenFile(f.path("d", "theirs"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatalf("O_CREAT without O_EXCL of a name another client made: %v", err)
	}
	_, err = w.WriteString("ours")
	must(t, err)
	must(t, w.Close())
	b, err := other.ReadFile(t.Context(), "/d/theirs")
	if err != nil || string(b) != "ours" {
		t.Fatalf("the file another client made reads %q, %v after our open with O_TRUNC and write", b, err)
	}
	must(t, os.Mkdir(f.path("d", "sub"), 0o755))
	_, err = other.Mkdir(t.Context(), "/d/sub/dir", 0o755)
	must(t, err)
	if _, err := os.OpenFile(f.path("d", "sub", "dir"), os.O_WRONLY|os.O_CREATE, 0o644); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("O_CREAT of a directory another client made: %v, want EISDIR", err)
	}
}

// TestNegativeTimeout looks up a name that is absent twice through a
// mount with a NegativeTimeout: the service is asked once (the kernel
// keeps the answer); without one, it is asked every time.
func TestNegativeTimeout(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		want    float64
	}{{time.Minute, 1}, {0, 2}} {
		opts := DefaultOptions()
		opts.NegativeTimeout = c.timeout
		f, calls, _ := countingMount(t, opts)
		before := calls.counts(t)["lookup"]
		for range 2 {
			if _, err := os.Stat(f.path("missing")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("stat of a missing name: %v", err)
			}
		}
		if n := calls.counts(t)["lookup"] - before; n != c.want {
			t.Errorf("NegativeTimeout %v: %v LOOKUPs reached the service for two stats of a missing name, want %v", c.timeout, n, c.want)
		}
		// Made through the mount, the name is found at once.
		must(t, os.WriteFile(f.path("missing"), []byte("here"), 0o644))
		if _, err := os.Stat(f.path("missing")); err != nil {
			t.Fatalf("NegativeTimeout %v: stat after the create: %v", c.timeout, err)
		}
	}
}
