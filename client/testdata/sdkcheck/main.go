// Command sdkcheck uses package client as code outside the module does:
// TestSDKFromAnotherModule builds it in a module of its own, whose go.mod
// points github.com/canopyfs/canopy at this checkout, and runs it against
// a server. It imports nothing of the module but package client, and
// exits with status 1 at the first result that is not what it should be.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/canopyfs/canopy/client"
)

func main() {
	addr := flag.String("addr", os.Getenv("CANOPY_ADDR"), "server address")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "sdkcheck:", err)
		os.Exit(1)
	}
	fmt.Println("sdkcheck: ok")
}

func run(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(addr, client.Options{
		CallTimeout: 10 * time.Second,
		Data:        client.DataOptions{CacheBytes: 16 << 20, Readahead: 1 << 20},
	})
	if err != nil {
		return err
	}
	defer c.Close()

	if err := c.MkdirAll(ctx, "/sdkcheck/dir", 0o755); err != nil {
		return err
	}
	want := []byte("written from another module\n")
	if err := c.WriteFile(ctx, "/sdkcheck/dir/hello.txt", want, 0o644); err != nil {
		return err
	}
	got, err := c.ReadFile(ctx, "/sdkcheck/dir/hello.txt")
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("ReadFile: %q, want %q", got, want)
	}

	// A File: write, seek back, read.
	f, err := c.OpenFile(ctx, "/sdkcheck/file.bin", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte("0123456789")); err != nil {
		return err
	}
	if _, err := f.Seek(4, io.SeekStart); err != nil {
		return err
	}
	part := make([]byte, 3)
	if _, err := io.ReadFull(f, part); err != nil || string(part) != "456" {
		return fmt.Errorf("read after seek: %q, %v; want \"456\"", part, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	fi, err := c.Stat(ctx, "/sdkcheck/file.bin")
	if err != nil {
		return err
	}
	if fi.Size() != 10 || fi.Mode().Perm() != 0o600 || fi.Sys().(*client.Attr).Ino != fi.Ino() {
		return fmt.Errorf("stat: size %d, mode %v, ino %d", fi.Size(), fi.Mode(), fi.Ino())
	}
	chunks, err := c.Chunks(ctx, fi.Ino(), 0, 1)
	if err != nil {
		return err
	}
	if len(chunks) != 1 || len(chunks[0].Slices) == 0 {
		return fmt.Errorf("chunks of a written file: %+v", chunks)
	}
	// A file too large to go inline with its commit is read through the
	// block cache.
	big := make([]byte, 200<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	if err := c.WriteFile(ctx, "/sdkcheck/file.big", big, 0o600); err != nil {
		return err
	}
	if got, err := c.ReadFile(ctx, "/sdkcheck/file.big"); err != nil || !slices.Equal(got, big) {
		return fmt.Errorf("read of a 200 KiB file: %d bytes, %v", len(got), err)
	}
	var stats client.CacheStats // a type of package client, named from outside
	stats, ok := c.CacheStats()
	if !ok || stats.Hits+stats.Misses == 0 {
		return fmt.Errorf("cache stats after reads: %+v, %v", stats, ok)
	}

	// io/fs.
	var walked []string
	err = fs.WalkDir(c.FS(ctx, "/sdkcheck"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		walked = append(walked, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk: %w", err)
	}
	if wantWalk := []string{".", "dir", "dir/hello.txt", "file.big", "file.bin"}; !slices.Equal(walked, wantWalk) {
		return fmt.Errorf("walk: %q, want %q", walked, wantWalk)
	}

	// The error contract.
	_, err = c.Stat(ctx, "/sdkcheck/missing")
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, syscall.ENOENT) || !errors.As(err, &pe) {
		return fmt.Errorf("stat of a missing path: %v", err)
	}
	if _, err := c.Mkdir(ctx, "/sdkcheck/dir", 0o755); !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("mkdir of an existing directory: %v", err)
	}
	return c.RemoveAll(ctx, "/sdkcheck")
}
