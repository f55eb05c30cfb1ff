package server

import (
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/wal"
)

// Durability modes (docs/server.md, "Durability modes"). A call marked
// early (rpc.Call.Early: the SDK's DurabilityPOSIX) is answered once the
// committer has appended its batch's records to the log, before their
// fsync; the syncer goroutine then makes them durable moments later, while
// the committer goes on. Every other call is answered after the fsync of
// its batch, as before (strict). The log is one sequence, synced in order,
// so a crash loses at most a suffix of it: never a change without the
// changes before it. SYNC is the call that waits: its batch is synced
// before it is answered, which makes durable every record appended before
// it, so every change answered to its caller before SYNC was sent.

// earlyOp reports whether o's reply may go before its batch is durable:
// its caller asked for it, and it is not SYNC, whose point is to wait, nor
// a tables call, whose replies are published from the reply stage.
func earlyOp(o *op) bool {
	if o.call == nil || !o.call.Early {
		return false
	}
	switch o.method {
	case pb.Method_SYNC, pb.Method_TABLES_GET, pb.Method_TABLES_UPDATE:
		return false
	}
	return true
}

// noteDurability updates what b needs of the committer for o, which the
// apply stage just applied; logged says whether o added a record.
func (b *batch) noteDurability(o *op, logged bool) {
	switch {
	case o.method == pb.Method_SYNC && !o.gone:
		b.sync = true
	case !logged:
	case earlyOp(o):
		b.early = true
	case !o.gone && (classOf(o.method) == classMutation || o.method == pb.Method_CREATE_OPEN):
		b.sync = true // CREATE_OPEN is a session call that also creates
	}
}

// syncer is the goroutine (run) that makes durable, with SyncFlushed, the
// records the committer flushed for early replies. It owns nothing but
// its loop: points come on in, the latest first (the committer replaces a
// point not yet taken by the newer one, which covers it). Its syncs are
// at least pause apart: nobody waits for them (SYNC is synced by the
// committer itself), and one sync then covers the records of every batch
// flushed meanwhile instead of a sync per batch, which on a stream of
// single calls (a program on a mount) would be a sync per call.
type syncer struct {
	log   commitLog
	in    chan wal.Flushed // from the committer; closed when the committer ends
	done  chan struct{}    // closed when run returns
	pause time.Duration    // least time from one sync's start to the next
	sleep func(time.Duration)
	fail  func(error)
	st    *stats
}

// newSyncer returns a syncer for start to run.
func newSyncer(log commitLog, pause time.Duration, fail func(error), st *stats) *syncer {
	return &syncer{log: log, in: make(chan wal.Flushed, 1), done: make(chan struct{}), pause: pause, sleep: time.Sleep, fail: fail, st: st}
}

// start runs the syncer's goroutine.
func (s *syncer) start() { go s.run() }

func (s *syncer) run() {
	defer close(s.done)
	var last time.Time
	for p := range s.in {
		if wait := s.pause - time.Since(last); wait > 0 {
			s.sleep(wait)
			select {
			case q, ok := <-s.in: // handed while waiting: covers p
				if ok {
					p = q
				}
			default:
			}
		}
		last = time.Now()
		if err := s.log.SyncFlushed(p); err != nil {
			s.fail(err)
			continue
		}
		s.st.syncs.Add(1)
	}
}

// hand gives the syncer p, replacing a point it has not taken yet. Only
// the committer calls it.
func (s *syncer) hand(p wal.Flushed) {
	select {
	case s.in <- p:
		return
	default:
	}
	select {
	case <-s.in: // an older point, covered by p
	default:
	}
	s.in <- p
}

// stop ends the syncer once it has synced what it was handed.
func (s *syncer) stop() {
	close(s.in)
	<-s.done
}

// deliverEarly answers b's early calls (earlyOp), right after the
// committer appended b's records; deliver skips them afterwards.
func (r *replier) deliverEarly(b *batch) {
	for _, o := range b.ops {
		if !earlyOp(o) {
			continue
		}
		r.buf = r.buf[:0]
		if o.reply != nil {
			r.buf, _ = proto.MarshalOptions{}.MarshalAppend(r.buf, o.reply)
		}
		o.call.Reply(o.status, r.buf)
		o.call = nil
	}
}
