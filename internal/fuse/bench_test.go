package fuse

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The benchmarks compare an operation through the mount with the same
// operation made by the SDK directly on the same server, in one run:
// the difference is what the kernel and the mount add.

func BenchmarkCreate(b *testing.B) {
	f := benchMount(b)
	b.Run("mount", func(b *testing.B) {
		dir := f.path(fmt.Sprint("m", b.N))
		must(b, os.Mkdir(dir, 0o755))
		b.ResetTimer()
		for i := range b.N {
			must(b, unix.Mknod(fmt.Sprintf("%s/f%d", dir, i), syscall.S_IFREG|0o644, 0))
		}
	})
	b.Run("sdk", func(b *testing.B) {
		dir := fmt.Sprint("/s", b.N)
		_, err := f.c.Mkdir(b.Context(), dir, 0o755)
		must(b, err)
		b.ResetTimer()
		for i := range b.N {
			_, err := f.c.Create(b.Context(), fmt.Sprintf("%s/f%d", dir, i), 0o644)
			must(b, err)
		}
	})
}

func BenchmarkStat(b *testing.B) {
	f := benchMount(b)
	must(b, os.WriteFile(f.path("x"), nil, 0o644))
	b.Run("mount-cached", func(b *testing.B) {
		for range b.N {
			var st syscall.Stat_t
			must(b, syscall.Stat(f.path("x"), &st))
		}
	})
	b.Run("sdk", func(b *testing.B) {
		for range b.N {
			_, err := f.c.Stat(b.Context(), "/x")
			must(b, err)
		}
	})
}

func BenchmarkStatUncached(b *testing.B) {
	f := benchMount(b, func(o *Options) { o.AttrTimeout, o.EntryTimeout = 0, 0 })
	must(b, os.WriteFile(f.path("x"), nil, 0o644))
	for range b.N {
		var st syscall.Stat_t
		must(b, syscall.Stat(f.path("x"), &st))
	}
}

// BenchmarkSequentialIO writes and reads a 32 MiB file in 1 MiB calls,
// through the mount and through the SDK.
func BenchmarkSequentialIO(b *testing.B) {
	f := benchMount(b)
	const size, chunk = 32 << 20, 1 << 20
	buf := randomBytes(chunk, 1)
	b.Run("write/mount", func(b *testing.B) {
		b.SetBytes(size)
		for i := range b.N {
			fd, err := os.Create(f.path(fmt.Sprint("w", i)))
			must(b, err)
			for off := 0; off < size; off += chunk {
				_, err := fd.Write(buf)
				must(b, err)
			}
			must(b, fd.Close())
		}
	})
	b.Run("write/sdk", func(b *testing.B) {
		b.SetBytes(size)
		for i := range b.N {
			fd, err := f.c.OpenFile(b.Context(), fmt.Sprint("/s", i), os.O_CREATE|os.O_WRONLY, 0o644)
			must(b, err)
			for off := 0; off < size; off += chunk {
				_, err := fd.Write(buf)
				must(b, err)
			}
			must(b, fd.Close())
		}
	})
	b.Run("read/mount", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			// Through a fresh open of a file the kernel has not cached:
			// written by the SDK.
			fd, err := os.Open(f.path("s0"))
			must(b, err)
			for {
				n, err := fd.Read(buf)
				if n == 0 || err != nil {
					break
				}
			}
			must(b, fd.Close())
		}
	})
	b.Run("read/sdk", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			fd, err := f.c.Open(b.Context(), "/s0")
			must(b, err)
			for {
				n, err := fd.Read(buf)
				if n == 0 || err != nil {
					break
				}
			}
			must(b, fd.Close())
		}
	})
}
