package engine

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkCommit commits one 4 KiB slice to one of 100,000 files per
// operation, appending to each file in turn: the steady state of many
// writers.
func BenchmarkCommit(b *testing.B) {
	e, _, inos, _ := bigDir(b, 100_000)
	first, _, _ := e.AllocSlices(e.Root(), MaxAllocSlices)
	left := uint64(MaxAllocSlices)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if left == 0 {
			first, _, _ = e.AllocSlices(e.Root(), MaxAllocSlices)
			left = MaxAllocSlices
		}
		id := first + MaxAllocSlices - left
		left--
		ino := inos[i%len(inos)]
		pos := uint32(i/len(inos)) * 4096 % (1 << 26)
		w := []SliceWrite{{Slice: Slice{ID: id, Size: 4096, Len: 4096, Pos: pos}}}
		if _, err := e.Commit(Root, ino, w, 0, 0, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadChunks reads the view of a file of one slice, and of a
// chunk fragmented into 16 and 256 overlapping slices.
func BenchmarkReadChunks(b *testing.B) {
	for _, k := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("slices=%d", k), func(b *testing.B) {
			e, _, inos, _ := bigDir(b, 1000)
			first, _, _ := e.AllocSlices(e.Root(), MaxAllocSlices)
			id := first
			for _, ino := range inos {
				for j := range k {
					w := []SliceWrite{{Slice: Slice{ID: id, Size: 1 << 20, Len: 1 << 20, Pos: uint32(j) * min(1<<19, (63<<20)/uint32(k))}}}
					id++
					if id == first+MaxAllocSlices {
						first, _, _ = e.AllocSlices(e.Root(), MaxAllocSlices)
						id = first
					}
					if _, err := e.Commit(Root, ino, w, 0, 0, 5); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, _, err := e.ReadChunks(inos[i%len(inos)], 0, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOneSliceFileMemory reports the heap bytes per file that one
// committed slice adds to an empty file (bytes/file), over 100,000 files.
func BenchmarkOneSliceFileMemory(b *testing.B) {
	const files = 100_000
	for b.Loop() {
		e, _, inos, _ := bigDir(b, files)
		first, _, _ := e.AllocSlices(e.Root(), MaxAllocSlices)
		id := first
		ids := make([]uint64, files)
		for i := range ids {
			ids[i] = id
			id++
			if id == first+MaxAllocSlices {
				first, _, _ = e.AllocSlices(e.Root(), MaxAllocSlices)
				id = first
			}
		}
		before := heapInUse()
		for i, ino := range inos {
			w := []SliceWrite{{Slice: Slice{ID: ids[i], Size: 1000, Len: 1000}}}
			if _, err := e.Commit(Root, ino, w, 0, 0, 5); err != nil {
				b.Fatal(err)
			}
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/files, "bytes/file")
		runtime.KeepAlive(e)
		runtime.KeepAlive(ids)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
