package groupfault

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// TestFailoverTime measures failover under load: writers keep creating
// files through the router while the leader is SIGKILLed (then
// restarted), or SIGSTOPped (then continued), CANOPY_FAILOVER_ROUNDS
// times each; for each round it prints the time from the fault to the
// first create, sent after it, that the router acknowledges, and at the
// end p50 and max. It runs only when CANOPY_FAILOVER_ROUNDS is set (a
// measurement, not a check: the figures go to docs/BENCHMARKS.md).
func TestFailoverTime(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("CANOPY_FAILOVER_ROUNDS"))
	if rounds <= 0 {
		t.Skip("set CANOPY_FAILOVER_ROUNDS to measure failover")
	}
	const tick = 50 * time.Millisecond
	c := newCluster(t, 3, tick)
	ctx := context.Background()
	opts := client.Options{Cred: &client.Cred{}, OpTimeout: 20 * time.Second, CallTimeout: time.Second}
	setup, err := client.Dial(c.router.Addr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	if err := setup.MkdirAll(ctx, "/load", 0o755); err != nil {
		t.Fatal(err)
	}
	// Background load: 4 writers.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var loadOps atomic.Int64
	for w := range 4 {
		cl, err := client.Dial(c.router.Addr(), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := cl.Create(ctx, fmt.Sprintf("/load/w%d-%d", w, i), 0o644); err == nil {
					loadOps.Add(1)
				}
			}
		}()
	}
	probe, err := client.Dial(c.router.Addr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	seq := 0
	// firstAck creates files until one is acknowledged and returns when,
	// giving up after limit.
	const limit = 10 * time.Second
	firstAck := func() (time.Time, bool) {
		end := time.Now().Add(limit)
		for time.Now().Before(end) {
			seq++
			cctx, cancel := context.WithDeadline(ctx, end)
			_, err := probe.Create(cctx, fmt.Sprintf("/load/probe-%d", seq), 0o644)
			cancel()
			if err == nil {
				return time.Now(), true
			}
		}
		return time.Time{}, false
	}
	for _, mode := range []string{"SIGKILL", "SIGSTOP"} {
		var times []time.Duration
		for r := range rounds {
			lead := c.waitLeader(20 * time.Second)
			if _, ok := firstAck(); !ok { // the group serves before the fault
				t.Fatal("no write acknowledged before the fault")
			}
			at := time.Now()
			if mode == "SIGKILL" {
				c.kill(lead)
			} else {
				c.signal(lead, syscall.SIGSTOP)
			}
			ack, ok := firstAck()
			d := ack.Sub(at)
			if !ok {
				d = limit
				t.Logf("%s round %d: leader replica %d, no write acknowledged within %v", mode, r+1, lead+1, limit)
			} else {
				t.Logf("%s round %d: leader replica %d, first acknowledged write after %v", mode, r+1, lead+1, d.Round(time.Millisecond))
			}
			times = append(times, d)
			if mode == "SIGKILL" {
				c.start(lead)
			} else {
				c.signal(lead, syscall.SIGCONT)
			}
			c.caughtUp(30 * time.Second) // all three caught up before the next round
		}
		slices.Sort(times)
		t.Logf("%s of the leader, %d rounds, tick %v, election after 10-20 ticks: p50 %v, max %v", mode, rounds, tick,
			times[len(times)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	}
	close(stop)
	wg.Wait()
	t.Logf("background creates acknowledged: %d", loadOps.Load())
}
