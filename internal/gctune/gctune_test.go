package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	p := Policy{Percent: 25, Floor: 64 << 20}
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 25},
		{16 << 20, 400}, // the floor: 64 MiB over 16 MiB live
		{256 << 20, 25}, // the floor equals a quarter
		{8 << 30, 25},   // a large namespace keeps the fraction
		{1, 100_000},    // bounded
		{128 << 20, 50}, // 64 MiB over 128 MiB
	} {
		if got := p.percentFor(c.live); got != c.want {
			t.Errorf("percentFor(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

// TestStartRaisesSmallHeapTarget: with a floor far above the live heap,
// the target set after a cycle is the floor's, not the fraction's.
func TestStartRaisesSmallHeapTarget(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	Start(Policy{Percent: 25, Floor: 1 << 30})
	for range 200 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // finalizers run on their own goroutine
		if cur := debug.SetGCPercent(-1); cur > 25 {
			debug.SetGCPercent(cur)
			return
		} else {
			debug.SetGCPercent(cur)
		}
	}
	t.Fatal("the collector's target stayed at the fraction with a small live heap")
}
