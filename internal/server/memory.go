package server

import (
	"runtime/debug"
	"time"
)

// Returning memory: the engine's namespace is mostly large blocks without
// pointers, so garbage collection costs little, but memory the collector
// frees stays with the process until the runtime's scavenger gives it
// back, slowly. The two moments that free much at once are a checkpoint
// written (its encoded body goes) and the idle sweep finishing a round
// that packed directories (their entry buffers and indexes go). After
// either, when Config.ReleaseMemory is set, the releaser returns what is
// free to the operating system (debug.FreeOSMemory), at most once every
// releaseEvery, on its own goroutine: the collection it forces runs
// alongside the apply loop.

// releaseEvery is the least time between two releases.
const releaseEvery = 10 * time.Second

// releaser is the memory releaser's goroutine (run): it returns freed
// memory to the operating system when told to, until the server stops.
// The apply stage and the checkpointer tell it through freed.
type releaser struct {
	enabled bool            // Config.ReleaseMemory
	wake    chan struct{}   // memory was freed; one pending signal at most
	stopped <-chan struct{} // closed when the server stops
}

// freed tells the releaser that memory was freed; it never blocks.
func (r *releaser) freed() {
	if !r.enabled {
		return
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run is the releaser's loop.
func (r *releaser) run() {
	var last time.Time
	for {
		select {
		case <-r.stopped:
			return
		case <-r.wake:
		}
		if wait := releaseEvery - time.Since(last); wait > 0 {
			select {
			case <-r.stopped:
				return
			case <-time.After(wait):
			}
		}
		debug.FreeOSMemory()
		last = time.Now()
	}
}
