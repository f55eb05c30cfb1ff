package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// TestOverload runs 20 times more concurrent callers than the server's
// queues hold, for a few seconds (10 without -short), with no retries so
// that every refusal is seen. Every call must end with a reply or BUSY
// within its deadline, the heap must stay bounded, the goroutines must go
// back to their baseline, and a normal call must succeed right after.
func TestOverload(t *testing.T) {
	duration := 10 * time.Second
	if testing.Short() {
		duration = 2 * time.Second
	}
	const queue = 64 // per class
	const callers = 20 * 2 * queue
	const conns = 16
	const heapBound = 256 << 20

	baseline := runtime.NumGoroutine()
	s, addr := openAndServe(t, Config{Dir: t.TempDir(), QueueSize: queue, Logger: slog.New(slog.DiscardHandler)})
	clients := make([]*rpc.Client, conns)
	for i := range clients {
		c, err := rpc.Dial(addr, rpc.ClientConfig{MaxRetries: -1, CallTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	stat, _ := proto.Marshal(&pb.NodeRequest{Path: "/"})
	touch, _ := proto.Marshal(&pb.SetattrRequest{Path: "/", Valid: uint32(pb.SetattrMask_SETATTR_MTIME_NOW)})
	var ok, busy, other atomic.Int64
	var firstOther atomic.Value
	var maxHeap atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			c := clients[i%conns]
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				method, req := uint16(pb.Method_GETATTR), stat
				if n%4 == 3 { // a quarter are mutations, logged like any other
					// but leaving the namespace's size alone: the heap
					// bound is about queues, not about how many calls
					// a fast machine manages to apply.
					method, req = uint16(pb.Method_SETATTR), touch
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				st, _, err := c.Call(ctx, method, rpc.Cred{}, req)
				cancel()
				switch {
				case err == nil && st == 0:
					ok.Add(1)
				case errors.Is(err, rpc.ErrBusy):
					busy.Add(1)
				default:
					other.Add(1)
					firstOther.CompareAndSwap(nil, fmt.Sprintf("status %d err %v", st, err))
				}
			}
		})
	}
	wg.Go(func() {
		var ms runtime.MemStats
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > maxHeap.Load() {
					maxHeap.Store(ms.HeapInuse)
				}
			}
		}
	})
	time.Sleep(duration)
	close(stop)
	wg.Wait()
	t.Logf("%d callers for %v: %d ok, %d busy, %d other; max heap in use %d MiB",
		callers, duration, ok.Load(), busy.Load(), other.Load(), maxHeap.Load()>>20)
	if other.Load() != 0 {
		t.Errorf("%d calls ended with neither a reply nor BUSY; first: %v", other.Load(), firstOther.Load())
	}
	if ok.Load() == 0 || busy.Load() == 0 {
		t.Errorf("want both served and refused calls under overload: %d ok, %d busy", ok.Load(), busy.Load())
	}
	if maxHeap.Load() > heapBound {
		t.Errorf("heap in use reached %d MiB, bound %d MiB", maxHeap.Load()>>20, heapBound>>20)
	}

	// Right after: a normal call succeeds at once, with no retry allowed.
	if st, _, err := clients[0].Call(context.Background(), uint16(pb.Method_GETATTR), rpc.Cred{}, stat); err != nil || st != 0 {
		t.Errorf("call after overload: %d %v", st, err)
	}
	for _, c := range clients {
		c.Close()
	}
	s.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline {
		t.Errorf("%d goroutines after overload, baseline %d", n, baseline)
	}
}
