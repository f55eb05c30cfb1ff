// Command fsync measures what one durable log append costs on the disk
// under a directory, the way a metadata partition's log pays it: a write
// of a group commit's bytes, then a sync. It compares three ways, each
// with 1 writer (one partition) and with 3 writers at once (three
// replicas sharing the disk):
//
//   - fsync: appends to a growing file, then fsync (what the log does);
//   - fdatasync: the same with fdatasync;
//   - fallocate: the file's space reserved with fallocate first (unwritten
//     extents), then fdatasync;
//   - prealloc: rewrites a file already written with zeros and synced,
//     then fdatasync (no size or extent change to journal).
//
// Usage: go run ./bench/fsync [-dir DIR] [-n SYNCS] [-bytes N]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the disk to measure")
	n := flag.Int("n", 2000, "syncs per writer")
	size := flag.Int("bytes", 3000, "bytes written before each sync")
	flag.Parse()
	fmt.Println("| writers | mode | mean per sync |")
	fmt.Println("|---:|---|---:|")
	for _, writers := range []int{1, 3} {
		for _, mode := range []string{"fsync", "fdatasync", "fallocate", "prealloc"} {
			d, err := run(*dir, writers, mode, *n, *size)
			if err != nil {
				fmt.Fprintln(os.Stderr, "fsync:", err)
				os.Exit(1)
			}
			fmt.Printf("| %d | %s | %.0f µs |\n", writers, mode, float64(d)/float64(time.Microsecond))
		}
	}
}

// run starts writers goroutines, each syncing n times in a file of its
// own, and returns the mean time of one write and sync.
func run(dir string, writers int, mode string, n, size int) (time.Duration, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total time.Duration
		first error
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := writer(filepath.Join(dir, fmt.Sprintf("canopy-fsync-%d-%d", os.Getpid(), w)), mode, n, size)
			mu.Lock()
			defer mu.Unlock()
			total += d
			if err != nil && first == nil {
				first = err
			}
		}()
	}
	wg.Wait()
	return total / time.Duration(writers), first
}

func writer(name, mode string, n, size int) (time.Duration, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return 0, err
	}
	defer os.Remove(name)
	defer f.Close()
	if mode == "fallocate" {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(n*size)); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	if mode == "prealloc" {
		zeros := make([]byte, n*size)
		if _, err := f.Write(zeros); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		if _, err := f.Seek(0, 0); err != nil {
			return 0, err
		}
	}
	buf := make([]byte, size)
	start := time.Now()
	for range n {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if mode == "fsync" {
			err = f.Sync()
		} else {
			err = unix.Fdatasync(int(f.Fd()))
		}
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w", mode, name, err)
		}
	}
	return time.Since(start) / time.Duration(n), nil
}
