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
// either, when Config.ReleaseMemory is set, releaseLoop returns what is
// free to the operating system (debug.FreeOSMemory), at most once every
// releaseEvery, on its own goroutine: the collection it forces runs
// alongside the apply loop.

// releaseEvery is the least time between two releases.
const releaseEvery = 10 * time.Second

// freed tells releaseLoop that memory was freed; it never blocks.
func (s *Server) freed() {
	if !s.cfg.ReleaseMemory {
		return
	}
	select {
	case s.release <- struct{}{}:
	default:
	}
}

// releaseLoop returns freed memory to the operating system when told to,
// until the server stops.
func (s *Server) releaseLoop() {
	defer s.loops.Done()
	var last time.Time
	for {
		select {
		case <-s.stopped:
			return
		case <-s.release:
		}
		if wait := releaseEvery - time.Since(last); wait > 0 {
			select {
			case <-s.stopped:
				return
			case <-time.After(wait):
			}
		}
		debug.FreeOSMemory()
		last = time.Now()
	}
}
