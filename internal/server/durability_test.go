package server

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/wal"
)

// syncLog is a commitLog whose background syncs wait for the test.
type syncLog struct {
	mu      sync.Mutex
	events  []string
	lsn     uint64
	release chan struct{} // SyncFlushed waits until it is closed
	synced  chan uint64   // SyncFlushed reports the point it synced
}

func (l *syncLog) note(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *syncLog) Append(recs ...[]byte) (uint64, error) {
	l.lsn += uint64(len(recs))
	l.note(fmt.Sprintf("append %d", len(recs)))
	return l.lsn, nil
}
func (l *syncLog) Sync() error                   { l.note("sync"); return nil }
func (l *syncLog) TruncateBefore(uint64) error   { return nil }
func (l *syncLog) Flush() (wal.Flushed, error)   { l.note("flush"); return wal.Flushed{}, nil }
func (l *syncLog) SyncFlushed(wal.Flushed) error { <-l.release; l.synced <- 0; return nil }

// The committer answers early calls once their batch is appended and
// leaves their fsync to the syncer, whatever it is doing; a strict call
// in the same batch still waits for an fsync of its own; SYNC syncs the
// log even in a batch without records.
func TestCommitterEarlyReplies(t *testing.T) {
	log := &syncLog{release: make(chan struct{}), synced: make(chan uint64, 8)}
	in := make(chan *batch)
	var st stats
	c := &committer{
		log: log, in: in, truncs: make(chan uint64), ckpts: make(chan *checkpointJob, 1),
		deliver: func(b *batch, err error) { log.note(fmt.Sprintf("deliver %d ops", len(b.ops))) },
		early:   func(b *batch) { log.note(fmt.Sprintf("early %d ops", len(b.ops))) },
		fail:    func(err error) { t.Errorf("committer failed: %v", err) },
		stats:   &st, metrics: newMetrics(nil, nil, nil), logger: slog.New(slog.DiscardHandler),
	}
	done := make(chan struct{})
	go func() { c.run(); close(done) }()

	early := &rpc.Call{Early: true}
	mk := &op{method: pb.Method_MKNOD, call: early}
	b1 := &batch{ops: []*op{mk}, recs: [][]byte{{1}}}
	b1.noteDurability(mk, true)
	in <- b1
	// The syncer now holds b1's point and waits; the committer goes on.
	b2 := &batch{ops: []*op{mk, mk}, recs: [][]byte{{2}, {3}}}
	b2.noteDurability(mk, true)
	in <- b2
	strict := &op{method: pb.Method_MKNOD, call: &rpc.Call{}}
	b3 := &batch{ops: []*op{mk, strict}, recs: [][]byte{{4}, {5}}}
	b3.noteDurability(mk, true)
	b3.noteDurability(strict, true)
	in <- b3
	sync := &op{method: pb.Method_SYNC, call: early}
	b4 := &batch{ops: []*op{sync}}
	b4.noteDurability(sync, false)
	in <- b4
	// Every batch went through while the syncer was held on b1's (or
	// b2's) point: the committer never waited for it.
	for n := 0; n < 15; {
		log.mu.Lock()
		n = len(log.events)
		log.mu.Unlock()
		runtime.Gosched()
	}
	close(log.release)
	close(in)
	<-done
	if len(log.synced) == 0 {
		t.Error("the syncer synced nothing")
	}

	want := []string{
		"append 1", "flush", "early 1 ops", "deliver 1 ops",
		"append 2", "flush", "early 2 ops", "deliver 2 ops",
		"append 2", "flush", "early 2 ops", "sync", "deliver 2 ops",
		"sync", "deliver 1 ops",
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if !slices.Equal(log.events, want) {
		t.Fatalf("events:\n got %q\nwant %q", log.events, want)
	}
	if !b1.early || b1.sync || !b3.sync || !b4.sync || b4.early {
		t.Errorf("batch marks: b1 early %v sync %v, b3 sync %v, b4 sync %v early %v", b1.early, b1.sync, b3.sync, b4.sync, b4.early)
	}
}

// countLog is a commitLog that counts its background syncs.
type countLog struct {
	syncLog
	syncs chan struct{}
}

func (l *countLog) SyncFlushed(wal.Flushed) error { l.syncs <- struct{}{}; return nil }

// The syncer's syncs are at least its pause apart, and the one after a
// pause covers every point handed during it: a stream of batches costs a
// sync per pause, not a sync per batch.
func TestSyncerPausesBetweenSyncs(t *testing.T) {
	log := &countLog{syncs: make(chan struct{}, 16)}
	var st stats
	slept := make(chan time.Duration)
	wake := make(chan struct{})
	s := newSyncer(log, time.Hour, func(err error) { t.Errorf("syncer failed: %v", err) }, &st)
	s.sleep = func(d time.Duration) { slept <- d; <-wake }
	s.start()

	s.hand(wal.Flushed{}) // the first sync goes at once
	<-log.syncs
	s.hand(wal.Flushed{}) // the next waits out the pause
	if d := <-slept; d <= 0 || d > time.Hour {
		t.Fatalf("the syncer slept %v; want the rest of its pause", d)
	}
	for range 5 { // handed while it sleeps: one sync covers them
		s.hand(wal.Flushed{})
	}
	close(wake)
	<-log.syncs
	s.stop()
	if n := len(log.syncs); n != 0 {
		t.Errorf("%d more syncs after the pause; want none (the points handed during it are covered)", n)
	}
	if got := st.syncs.Load(); got != 2 {
		t.Errorf("%d syncs counted; want 2", got)
	}
}
