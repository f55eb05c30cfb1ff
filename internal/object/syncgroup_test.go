package object

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSyncGroupCoversEveryCaller checks the promise a Put relies on: when
// do returns, a sync that started after the call began has finished.
func TestSyncGroupCoversEveryCaller(t *testing.T) {
	var (
		g     syncGroup
		clock atomic.Int64 // orders events across goroutines
		runs  atomic.Int64
		mu    sync.Mutex
		spans [][2]int64 // [start, end] of every sync
	)
	doSync := func() error {
		start := clock.Add(1)
		runs.Add(1)
		for range 100 {
			clock.Add(1)
		}
		mu.Lock()
		spans = append(spans, [2]int64{start, clock.Add(1)})
		mu.Unlock()
		return nil
	}
	const callers, rounds = 16, 200
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range rounds {
				asked := clock.Add(1)
				if err := g.do(doSync); err != nil {
					t.Error(err)
					return
				}
				returned := clock.Add(1)
				mu.Lock()
				covered := false
				for _, s := range spans {
					if s[0] > asked && s[1] < returned {
						covered = true
						break
					}
				}
				mu.Unlock()
				if !covered {
					t.Errorf("call asked at %d returned at %d with no sync between", asked, returned)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := runs.Load(); n > callers*rounds {
		t.Errorf("%d syncs for %d calls", n, callers*rounds)
	}
	t.Logf("%d syncs for %d calls", runs.Load(), callers*rounds)
}

// TestSyncGroupReportsFailure checks that a failed sync reaches the callers
// it was meant to cover, and that a later good sync clears it.
func TestSyncGroupReportsFailure(t *testing.T) {
	var g syncGroup
	boom := errors.New("boom")
	if err := g.do(func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	if err := g.do(func() error { return nil }); err != nil {
		t.Fatalf("after a good sync: %v", err)
	}
}
