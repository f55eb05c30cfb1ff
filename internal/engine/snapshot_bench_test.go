package engine

import (
	"flag"
	"fmt"
	"syscall"
	"testing"
	"time"
)

var flagSnapFiles = flag.Int("snap.files", 100_000, "BenchmarkSnapshot: files in the tree (1000000 for the recorded run)")

// snapBenchTree builds /top with nfiles regular files, a thousand to a
// directory, each holding one slice of data.
func snapBenchTree(b *testing.B, nfiles int) (*Engine, Ino) {
	b.Helper()
	e := New(1, 1)
	now := int64(2)
	top, err := e.Mkdir(Root, e.Root(), "top", 0o755, now)
	if err != nil {
		b.Fatal(err)
	}
	first, _, err := e.AllocSlices(e.Root(), 1)
	if err != nil {
		b.Fatal(err)
	}
	var d Ino
	next, left := first+1, uint32(0)
	for i := 0; i < nfiles; i++ {
		if i%1000 == 0 {
			a, err := e.Mkdir(Root, top.Ino, fmt.Sprint("d", i/1000), 0o755, now)
			if err != nil {
				b.Fatal(err)
			}
			d = a.Ino
		}
		f, err := e.Mknod(Root, d, fmt.Sprint("file.", i), S_IFREG|0o644, 0, now)
		if err != nil {
			b.Fatal(err)
		}
		if left == 0 {
			var n uint32
			if next, n, err = e.AllocSlices(e.Root(), MaxAllocSlices); err != nil {
				b.Fatal(err)
			}
			left = n
		}
		w := []SliceWrite{{Slice: Slice{ID: next, Size: 4096, Len: 4096}}}
		if _, err := e.Commit(Root, f.Ino, w, 0, 0, now); err != nil {
			b.Fatal(err)
		}
		next++
		left--
	}
	return e, top.Ino
}

// BenchmarkSnapshot takes a snapshot of a tree of -snap.files files (and
// removes it again, outside the timer); it reports the tree's size and
// the snapshot's nodes per second. BenchmarkClone is the same for a
// clone.
func BenchmarkSnapshot(b *testing.B) {
	nfiles := *flagSnapFiles
	start := time.Now()
	e, top := snapBenchTree(b, nfiles)
	b.Logf("%d files built in %v", nfiles, time.Since(start).Round(time.Millisecond))
	b.ResetTimer()
	var nodes uint64
	var cpu time.Duration // the process's CPU time in the snapshots: on a busy machine, less than the wall clock's
	for i := 0; i < b.N; i++ {
		c0 := cpuTime()
		info, err := e.SnapshotCreate(Root, top, fmt.Sprint("s", i), int64(3+i))
		if err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
		nodes = info.Nodes
		b.StopTimer()
		if err := e.SnapshotRemove(Root, top, info.Name, int64(3+i)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(float64(nodes)*float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkClone(b *testing.B) {
	nfiles := *flagSnapFiles
	e, top := snapBenchTree(b, nfiles)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Clone(Root, top, e.Root(), fmt.Sprint("c", i), int64(3+i)); err != nil {
			b.Fatal(err)
		}
	}
}
