package bench

import (
	"context"
	"errors"
)

// Workload is what the runner drives.
type Workload interface {
	// Prepare readies the state the next phase needs; it is not timed.
	// Phase 0 is the warm-up, phases 1 to Rounds the measured rounds.
	Prepare(ctx context.Context, phase int) error
	// Do performs one operation as worker w, 0 <= w < Workers. Calls for
	// one w never overlap. It returns ErrExhausted when worker w has
	// nothing left to do in this phase.
	Do(ctx context.Context, w int) error
}

// ErrExhausted is returned by Workload.Do when the worker has used up the
// items of the phase (every file renamed, every file removed).
var ErrExhausted = errors.New("no work left in this phase")

// Func is a Workload that needs no preparation.
type Func func(ctx context.Context, w int) error

// Prepare does nothing.
func (Func) Prepare(context.Context, int) error { return nil }

// Do calls f.
func (f Func) Do(ctx context.Context, w int) error { return f(ctx, w) }
