package server

import (
	"context"
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkOpenClose measures OPEN followed by CLOSE of one file from
// parallel clients: calls that change no namespace but do change the
// sessions. The syncs/op metric shows how many fsyncs they cost.
func BenchmarkOpenClose(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s, c := serveOn(b, Config{Dir: b.TempDir()})
			ctx := context.Background()
			fi, err := c.Create(ctx, "/f", 0o644)
			if err != nil {
				b.Fatal(err)
			}
			pair := func() error {
				if _, err := c.OpenIno(ctx, fi.Ino(), 0); err != nil {
					return err
				}
				return c.CloseIno(ctx, fi.Ino())
			}
			before := s.Stats()
			b.ResetTimer()
			if clients == 1 {
				for range b.N {
					if err := pair(); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := pair(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			b.ReportMetric(float64(s.Stats().Syncs-before.Syncs)/float64(b.N), "syncs/op")
		})
	}
}
