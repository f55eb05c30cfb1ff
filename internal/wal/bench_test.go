package wal

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/canopyfs/canopy/internal/vfs"
)

// BenchmarkAppendSync measures group commit on the real disk: each
// iteration appends a batch of 128-byte records and syncs once. Compare
// its syncs/s with BenchmarkFsync's fsyncs/s for the disk's own limit.
func BenchmarkAppendSync(b *testing.B) {
	for _, batch := range []int{1, 16, 128, 1024} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			l := openLog(b, vfs.Default, b.TempDir(), Options{})
			defer l.Close()
			recs := make([][]byte, batch)
			for i := range recs {
				recs[i] = make([]byte, 128)
			}
			b.SetBytes(int64(batch * (recordHeaderSize + 128)))
			b.ReportAllocs()
			syncs := 0
			for b.Loop() {
				if _, err := l.Append(recs...); err != nil {
					b.Fatal(err)
				}
				if err := l.Sync(); err != nil {
					b.Fatal(err)
				}
				syncs++
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(syncs*batch)/secs, "records/s")
			b.ReportMetric(float64(syncs)/secs, "syncs/s")
		})
	}
}

// BenchmarkFsync measures the disk itself: a 4 KiB append and an fsync per
// iteration, through the same FS the log uses.
func BenchmarkFsync(b *testing.B) {
	f, err := vfs.Default.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4<<10)
	b.SetBytes(int64(len(buf)))
	syncs := 0
	for b.Loop() {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		syncs++
	}
	b.ReportMetric(float64(syncs)/b.Elapsed().Seconds(), "fsyncs/s")
}

// BenchmarkAppend measures Append without Sync on the real disk: framing,
// checksumming and buffered writes, with a segment roll (and its fsync)
// every 64 MiB.
func BenchmarkAppend(b *testing.B) {
	l := openLog(b, vfs.Default, b.TempDir(), Options{})
	defer l.Close()
	rec := make([]byte, 128)
	b.SetBytes(int64(recordHeaderSize + len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
}
