package mount

import "sync/atomic"

// Current holds the live mount table snapshot of a router. Load takes no
// lock and never blocks, so every request can call it; Store publishes a
// newer snapshot, which readers pick up on their next Load while those
// already holding the old one finish with it undisturbed. The zero value
// holds no snapshot.
type Current struct {
	p atomic.Pointer[Snapshot]
}

// Load returns the live snapshot, or nil if none has been stored. A caller
// should Load once per request and use that snapshot for the whole request,
// so all its answers come from one version.
func (c *Current) Load() *Snapshot { return c.p.Load() }

// Store makes s the live snapshot if its version is newer than the live
// one's (or none is stored), and reports whether it did. Snapshots arriving
// out of order are thereby ignored, so the version a router serves never
// goes back.
func (c *Current) Store(s *Snapshot) bool {
	return storeNewer(&c.p, s, (*Snapshot).Version)
}

// storeNewer swaps s into p if its version is greater than that of the
// snapshot p holds, retrying if another Store gets in between.
func storeNewer[T any](p *atomic.Pointer[T], s *T, version func(*T) uint64) bool {
	if s == nil {
		return false
	}
	for {
		old := p.Load()
		if old != nil && version(s) <= version(old) {
			return false
		}
		if p.CompareAndSwap(old, s) {
			return true
		}
	}
}
