package bench

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// fakeClock is a clock that moves only when told to: an operation
// advances it by its cost, and sleeping jumps to the wake-up time. With
// one worker every run on it is deterministic.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) SleepUntil(_ context.Context, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// near reports whether got is within frac of want.
func near(got, want, frac float64) bool {
	return math.Abs(got-want) <= frac*math.Abs(want)
}

// startServer runs a metadata server on 127.0.0.1 until the test ends and
// returns connections to it.
func startServer(t *testing.T, conns int) Conns {
	t.Helper()
	_, addr := servertest.Start(t, server.Config{})
	cs, err := Dial(addr, client.Options{OpTimeout: 10 * time.Second}, conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
