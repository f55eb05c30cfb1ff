// Package gctune sets the Go collector's target for a metadata server:
// headroom of a fraction of the live heap, as GOGC does, but never less
// than a floor. A large namespace, held mostly in blocks the collector
// never scans, keeps the small fraction (memory freed comes back soon);
// a small one is not collected after every few megabytes allocated, which
// would make replicating and serving calls pay for collections more than
// for the work.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Policy is the collector's target: the heap may grow by Percent of the
// live heap, or by Floor bytes, whichever is more, before the next cycle.
type Policy struct {
	Percent int
	Floor   uint64
}

// percentFor is the GOGC percentage that gives live bytes of live heap
// the policy's headroom.
func (p Policy) percentFor(live uint64) int {
	if live == 0 {
		return p.Percent
	}
	floor := p.Floor * 100 / live
	if floor > uint64(p.Percent) {
		return int(min(floor, 100_000))
	}
	return p.Percent
}

var once sync.Once

// Start applies p now and again after every collection, for the life of
// the process; only its first call has an effect. The hook is a finalizer
// that re-arms itself at each cycle, reads the live heap the cycle found
// and changes the target when it moves by more than a tenth.
func Start(p Policy) {
	once.Do(func() {
		t := &tuner{p: p, set: p.Percent, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
		debug.SetGCPercent(p.percentFor(0))
		t.arm()
	})
}

// tuner is owned by the finalizer goroutine, which runs one finalizer at
// a time.
type tuner struct {
	p      Policy
	set    int
	sample []metrics.Sample
}

// arm sets a finalizer on a fresh object, which the next cycle frees.
func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		s.t.cycled()
		s.t.arm()
	})
}

type sentinel struct {
	t *tuner
	_ [16]byte // not a tiny allocation, which could share a block with live data
}

func (t *tuner) cycled() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	want := t.p.percentFor(t.sample[0].Value.Uint64())
	if want*10 < t.set*9 || want*10 > t.set*11 {
		debug.SetGCPercent(want)
		t.set = want
	}
}
