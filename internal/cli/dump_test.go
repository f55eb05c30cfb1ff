package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

const dumpTestFiles = 100_000

// fillForDump fills /base with files dumpTestFiles in all: regular files,
// some with contents and xattrs, hard links and symlinks, in directories
// of 1,000.
func fillForDump(t *testing.T, c *client.Client, files int) {
	t.Helper()
	ctx := t.Context()
	const perDir = 1000
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := w; d*perDir < files; d += 8 {
				dir := fmt.Sprintf("/base/d%03d", d)
				if err := c.MkdirAll(ctx, dir, 0o755); err != nil {
					errs <- err
					return
				}
				for i := range min(perDir, files-d*perDir) {
					p := fmt.Sprintf("%s/f%04d", dir, i)
					var err error
					switch {
					case i%100 == 1:
						err = c.WriteFile(ctx, p, []byte(strings.Repeat(p, i%7+1)), 0o644)
					case i%100 == 2:
						_, err = c.Symlink(ctx, "f0001", p)
					case i%100 == 3:
						_, err = c.Link(ctx, dir+"/f0001", p)
					default:
						_, err = c.Create(ctx, p, 0o600)
					}
					if err == nil && i%50 == 0 {
						err = c.SetXattr(ctx, p, "user.n", []byte(p), 0)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// loadInto restores the dump file into a new metadata directory and
// starts a server on it with the object store storage.
func loadInto(t *testing.T, dump, storage string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "meta")
	if out, err := canopy(t, "127.0.0.1:1", "load", "--dir", dir, dump); err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}
	_, addr := servertest.Start(t, server.Config{Dir: dir, Storage: storage})
	return addr
}

func TestDumpUnderLoadAndLoad(t *testing.T) {
	files := dumpTestFiles
	if testing.Short() {
		files = 5000
	}
	storage := "file://" + t.TempDir()
	_, addr := servertest.Start(t, server.Config{Storage: storage})
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fillForDump(t, c, files)
	base := sumOf(t, addr, "/base")
	if base.Files+base.Symlinks+base.Links != uint64(files) || base.Xattrs == 0 || base.Bytes == 0 {
		t.Fatalf("filled tree: %+v", base)
	}

	// A writer creates /live/wN, one after the other, each holding its
	// name, while the dump is taken.
	if _, err := c.Mkdir(t.Context(), "/live", 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	var written atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			p := fmt.Sprintf("/live/w%07d", i)
			if err := c.WriteFile(ctx, p, []byte(p), 0o644); err != nil {
				if ctx.Err() != nil {
					err = nil
				}
				done <- err
				return
			}
			written.Add(1)
		}
	}()
	waitWritten := func(n int64) {
		for written.Load() < n && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}
	waitWritten(20) // let the writer get going
	dumps := map[string]string{}
	for _, format := range []string{"json", "binary"} {
		dumps[format] = filepath.Join(t.TempDir(), "meta."+format)
		before := written.Load()
		mustCanopy(t, addr, "dump", "--format", format, "--output", dumps[format])
		waitWritten(before + 20)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	for format, dump := range dumps {
		checkLiveDump(t, format, loadInto(t, dump, storage), base, written.Load())
	}

	// With no writer, dump and load round-trip the whole tree exactly.
	full := sumOf(t, addr, "/")
	for _, format := range []string{"json", "binary"} {
		again := filepath.Join(t.TempDir(), "again."+format)
		mustCanopy(t, addr, "dump", "--format", format, "-o", again)
		if got := sumOf(t, loadInto(t, again, storage), "/"); got != full {
			t.Fatalf("%s: whole tree after dump and load %+v, before %+v", format, got, full)
		}
	}
}

// checkLiveDump checks a server loaded from a dump taken while the
// writer ran: /base as it was, and the writer's files up to some point
// and none after: w0 .. wK-1, each whole.
func checkLiveDump(t *testing.T, format, loaded string, base treeSum, written int64) {
	t.Helper()
	if got := sumOf(t, loaded, "/base"); got != base {
		t.Fatalf("%s: /base after dump and load %+v, before %+v", format, got, base)
	}
	lc, err := client.Dial(loaded, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	ents, err := lc.ReadDir(t.Context(), "/live")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) == 0 || int64(len(ents)) > written {
		t.Fatalf("%s: %d of the writer's %d files in the dump", format, len(ents), written)
	}
	for i, e := range ents {
		want := fmt.Sprintf("w%07d", i)
		if e.Name() != want {
			t.Fatalf("%s: entry %d of /live is %s, want %s", format, i, e.Name(), want)
		}
		if i == len(ents)-1 || i%97 == 0 {
			// The last may have been created and not yet written when
			// the dump was taken (WriteFile creates, then commits data).
			b, err := lc.ReadFile(t.Context(), "/live/"+want)
			if err != nil || string(b) != "/live/"+want && (i < len(ents)-1 || len(b) != 0) {
				t.Fatalf("%s: /live/%s holds %q (%v)", format, want, b, err)
			}
		}
	}
	t.Logf("%s: dump taken with %d of the writer's files, %d written in all", format, len(ents), written)
}

func TestLoadRefusesNonEmptyAndDamage(t *testing.T) {
	storage := "file://" + t.TempDir()
	_, addr := servertest.Start(t, server.Config{Storage: storage})
	sumTree(t, addr, nil)
	dump := filepath.Join(t.TempDir(), "d")
	mustCanopy(t, addr, "dump", "--format", "binary", "-o", dump)
	jsonDump := filepath.Join(t.TempDir(), "j")
	mustCanopy(t, addr, "dump", "-o", jsonDump)

	dir := filepath.Join(t.TempDir(), "meta")
	mustCanopy(t, "127.0.0.1:1", "load", "--dir", dir, dump)
	if _, err := canopy(t, "127.0.0.1:1", "load", "--dir", dir, dump); !errors.Is(err, server.ErrNotEmpty) {
		t.Fatalf("load into a non-empty directory: %v", err)
	}
	if _, err := canopy(t, "127.0.0.1:1", "load", "--dir", dir, jsonDump); !errors.Is(err, server.ErrNotEmpty) {
		t.Fatalf("load JSON into a non-empty directory: %v", err)
	}
	mustCanopy(t, "127.0.0.1:1", "load", "--force", "--dir", dir, dump)
	mustCanopy(t, "127.0.0.1:1", "load", "--force", "--dir", dir, jsonDump)
	jraw, err := os.ReadFile(jsonDump)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(jraw)), "\n")
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["t"] == nil {
			t.Fatalf("JSON dump line %d %q: %v", i+1, l, err)
		}
	}

	raw, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"flipped byte": func() []byte { b := append([]byte(nil), raw...); b[len(b)/2] ^= 1; return b }(),
		"cut short":    raw[:len(raw)-40],
		"no checksum":  raw[:len(raw)-32],
		"not a dump":   []byte("hello"),
		"JSON cut":     jraw[:len(jraw)/2],
		"JSON no head": []byte(strings.Join(lines[1:], "\n")),
	} {
		p := filepath.Join(t.TempDir(), "bad")
		os.WriteFile(p, bad, 0o644)
		d := filepath.Join(t.TempDir(), "meta")
		if _, err := canopy(t, "127.0.0.1:1", "load", "--dir", d, p); !errors.Is(err, ErrBadDump) {
			t.Errorf("%s: load: %v", name, err)
		}
	}

	// A dump needs root.
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{UID: 1000, GID: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Dump(t.Context(), 0, new(strings.Builder), nil, nil); !errors.Is(err, os.ErrPermission) {
		t.Errorf("dump as uid 1000: %v", err)
	}
}
