package object

import "sync"

// syncGroup shares one directory fsync among the Puts that need it, the way
// a log shares one fsync among the records of a batch: a caller needs a
// sync that starts after it asks, and every caller waiting when a sync
// starts is covered by it. Concurrent Puts into one directory then cost
// about one directory fsync per disk round trip instead of one each.
//
// Safe for concurrent use; the zero value is ready.
type syncGroup struct {
	mu       sync.Mutex
	cond     sync.Cond
	running  bool   // a sync is in progress
	started  uint64 // generations started
	finished uint64 // the last generation finished
	failed   uint64 // the last generation that failed, 0 if none
	err      error  // its error
}

// do returns once a call of fn that started after do was called has
// finished, running it itself if no other caller is; it returns that
// call's error, or a later failed one's.
func (g *syncGroup) do(fn func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond.L == nil {
		g.cond.L = &g.mu
	}
	want := g.started + 1
	for g.finished < want {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		g.started++
		gen := g.started
		g.mu.Unlock()
		err := fn()
		g.mu.Lock()
		g.running = false
		g.finished = gen
		if err != nil {
			g.failed, g.err = gen, err
		}
		g.cond.Broadcast()
	}
	if g.failed >= want {
		return g.err
	}
	return nil
}
