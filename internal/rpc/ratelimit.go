package rpc

import (
	"context"
	"fmt"
	"time"
)

// waitToken takes a token from the client's rate limiter for one attempt,
// waiting for it on w's timer if none is left. It does not wait at all when
// the token would come after deadline: it fails at once with ErrTimeout,
// and the token stays in the bucket. It runs on the calling goroutine.
func (c *Client) waitToken(ctx context.Context, w *waiter, deadline time.Time) error {
	now := time.Now()
	if c.limiter.AllowN(now, 1) {
		return nil // the common case, which allocates nothing
	}
	r := c.limiter.ReserveN(now, 1)
	if !r.OK() {
		return fmt.Errorf("rate limit: burst %d admits no call", c.limiter.Burst())
	}
	delay := r.DelayFrom(now)
	if now.Add(delay).After(deadline) {
		r.CancelAt(now)
		return fmt.Errorf("rate limit: next call allowed in %v, after the call's deadline: %w", delay, ErrTimeout)
	}
	w.timer.Reset(delay)
	select {
	case <-w.timer.C:
		return nil
	case <-ctx.Done():
		w.timer.Stop()
		r.Cancel()
		return ctxErr(ctx)
	}
}
