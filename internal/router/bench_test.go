package router

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/canopyfs/canopy/client"
)

// The benchmarks run a metadata partition and a router in this process and
// measure 16 callers on one client connection, straight to the partition
// and through the router: `go test -run '^$' -bench . ./internal/router`.
// The ratio of the two is what the router costs; everything shares the
// machine's cores.

func benchTarget(b *testing.B, viaRouter bool) *client.Client {
	b.Helper()
	_, a0 := startPartition(b, 0)
	d0 := dial(b, a0)
	update(b, d0, client.TablesUpdate{SetRoutes: []client.Route{{VPart: 0, Addrs: []string{a0}}}})
	if !viaRouter {
		return d0
	}
	return dial(b, startReal(b, a0).Addr())
}

func benchStat(b *testing.B, viaRouter bool) {
	c := benchTarget(b, viaRouter)
	ctx := testCtx(b)
	const files = 1000
	if err := c.MkdirAll(ctx, "/bench", 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range files {
		if _, err := c.Create(ctx, fmt.Sprintf("/bench/f%d", i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.SetParallelism(8) // 16 callers on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Stat(ctx, fmt.Sprintf("/bench/f%d", n.Add(1)%files)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchCreate(b *testing.B, viaRouter bool) {
	c := benchTarget(b, viaRouter)
	ctx := testCtx(b)
	if err := c.MkdirAll(ctx, "/bench", 0o755); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Create(ctx, fmt.Sprintf("/bench/f%d", n.Add(1)), 0o644); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkStatDirect(b *testing.B)   { benchStat(b, false) }
func BenchmarkStatRouter(b *testing.B)   { benchStat(b, true) }
func BenchmarkCreateDirect(b *testing.B) { benchCreate(b, false) }
func BenchmarkCreateRouter(b *testing.B) { benchCreate(b, true) }
