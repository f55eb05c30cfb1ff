package replica

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/vfs"
)

// BenchmarkPropose measures proposals/s through a group with 64
// proposers at once, whose proposals the Ready loop groups into shared
// appends and fsyncs. On MemFS the figure is Raft's and this package's
// cost; on disk every replica fsyncs (all on the same disk here).
func BenchmarkPropose(b *testing.B) {
	for _, disk := range []bool{false, true} {
		for _, size := range []int{1, 3} {
			name := fmt.Sprintf("replicas=%d/memfs", size)
			if disk {
				name = fmt.Sprintf("replicas=%d/disk", size)
			}
			b.Run(name, func(b *testing.B) { benchPropose(b, size, disk) })
		}
	}
}

func benchPropose(b *testing.B, size int, disk bool) {
	tmp := b.TempDir()
	c := newCluster(b, size, func(cfg *Config) {
		cfg.SnapshotEntries = 1 << 40
		if disk {
			cfg.FS, cfg.Dir = vfs.Default, filepath.Join(tmp, fmt.Sprint(cfg.ID))
		}
	})
	n := c.nodes[c.leader()]
	data := []byte("key-0000000000=value-0000000000000000")
	const proposers = 64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := (b.N + proposers - 1) / proposers
	for range proposers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if _, err := n.Propose(context.Background(), data); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*proposers)/b.Elapsed().Seconds(), "proposals/s")
}

// BenchmarkFailover kills the leader of a 3-replica group running the
// default election settings (50 ms ticks, elections after 10 to 20 ticks,
// heartbeats every tick) and measures the time from the kill to the first
// write acknowledged by the new leader; the killed replica is restarted
// from its disk before the next round. Run it with -benchtime=Nx.
func BenchmarkFailover(b *testing.B) {
	c := newCluster(b, 3, func(cfg *Config) {
		cfg.TickInterval, cfg.ElectionTicks, cfg.HeartbeatTicks = 0, 0, 0 // the defaults
	})
	c.put("warm", "up")
	var worst time.Duration
	var total time.Duration
	rounds := 0
	for b.Loop() {
		old := c.leader()
		start := time.Now()
		c.kill(old)
		c.put("after", fmt.Sprint(rounds), c.others(old)...)
		d := time.Since(start)
		total += d
		worst = max(worst, d)
		rounds++
		c.net.Heal()
		c.start(old, nil)
		c.waitApplied(old, c.status(c.leader()).Commit)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(rounds), "ms/failover")
	b.ReportMetric(float64(worst.Milliseconds()), "max-ms")
}
