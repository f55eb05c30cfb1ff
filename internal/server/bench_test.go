package server

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkDurableCreate measures creates acknowledged by a server on the
// real disk: each reply means the create is in the log and synced. With
// many clients, group commit makes one fsync cover many creates; the
// records/sync metric shows how many. Compare creates/s with the disk's own
// fsyncs per second (BenchmarkFsync in internal/wal) in the same run.
func BenchmarkDurableCreate(b *testing.B) {
	for _, clients := range []int{1, 16, 64} { // 1 runs serially; others round up to a multiple of GOMAXPROCS
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, c := serveOn(b, Config{Dir: b.TempDir()})
			ctx := context.Background()
			var next atomic.Int64
			before := s.Stats()
			b.ResetTimer()
			if clients == 1 {
				for i := range b.N {
					if _, err := c.Create(ctx, fmt.Sprintf("/f%d", i), 0o644); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := c.Create(ctx, fmt.Sprintf("/f%d", next.Add(1)), 0o644); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.StopTimer()
			after := s.Stats()
			syncs := after.Syncs - before.Syncs
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
			if syncs > 0 {
				b.ReportMetric(float64(after.Records-before.Records)/float64(syncs), "records/sync")
			}
		})
	}
}
