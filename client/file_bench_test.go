package client_test

import (
	"flag"
	"io"
	"os"
	"testing"

	"github.com/canopyfs/canopy/client"
)

const benchFileSize = 256 << 20

var benchUploads = flag.Int("uploads", 0, "BenchmarkFileWrite: uploads in flight (0: the default)")

// BenchmarkFileWrite writes a 256 MiB file in 1 MiB calls and closes it
// (local backend): uploads, fsyncs of the store and the commit included.
func BenchmarkFileWrite(b *testing.B) {
	e := startData(b, backends[0], client.Options{Data: client.DataOptions{Uploads: *benchUploads}})
	buf := randomBytes(1, 1<<20)
	b.SetBytes(benchFileSize)
	for b.Loop() {
		f, err := e.c.OpenFile(e.ctx, "/bench", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < benchFileSize; off += len(buf) {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFileRead reads a 256 MiB file sequentially in 1 MiB calls
// through a client whose block cache is smaller than the file, so every
// pass fetches the blocks from the store (the local backend: the
// operating system's page cache).
func BenchmarkFileRead(b *testing.B) {
	e := startData(b, backends[0], client.Options{})
	buf := randomBytes(1, 1<<20)
	f, err := e.c.OpenFile(e.ctx, "/bench", os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	for off := 0; off < benchFileSize; off += len(buf) {
		f.Write(buf)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchFileSize)
	for b.Loop() {
		f, err := e.c.Open(e.ctx, "/bench")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		if err != nil || n != benchFileSize {
			b.Fatal(n, err)
		}
		f.Close()
	}
}
