package bench

import (
	"context"
	"time"
)

// clock is where the runner reads the time and waits; tests replace it.
type clock interface {
	Now() time.Time
	// SleepUntil returns at t or when ctx is done, whichever comes first.
	SleepUntil(ctx context.Context, t time.Time)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) SleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	if d < time.Millisecond {
		time.Sleep(d)
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
