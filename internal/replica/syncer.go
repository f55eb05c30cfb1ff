package replica

// The syncer: Raft's asynchronous storage writes (raft.Config.
// AsyncStorageWrites). The raft goroutine writes each MsgStorageAppend's
// hard state and entries to the log (the hard state with its own fsyncs,
// rare: only when the term or vote changes; the entries into the segment
// file, unsynced) and hands the syncer the point written and the
// message's responses. The syncer makes the points durable with
// wal.Log.SyncFlushed — every point waiting when it starts is covered by
// one fsync (group commit across Readies) — and then delivers the
// responses in order: those to other replicas (acknowledgements of
// entries, votes) straight to the Transport, those to this replica back
// to the raft goroutine, which steps them. Meanwhile the raft goroutine
// goes on: it sends, applies what is committed, and takes the next
// proposals and acknowledgements.

import (
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/canopyfs/canopy/internal/wal"
)

// syncJob is one MsgStorageAppend written to the log and not yet known
// durable, with the responses to deliver once it is.
type syncJob struct {
	point   wal.Flushed
	resps   []pb.Message
	entries int
	written time.Time // when the raft goroutine wrote the entries
}

// syncDone reports, in order, that jobs jobs handed to the syncer are
// done: durable, their responses to other replicas sent, local holding
// those to this replica (in order); or that the sync failed (err), in
// which case nothing was delivered.
type syncDone struct {
	jobs     int
	appended int // of the jobs, those that carried entries
	local    []pb.Message
	err      error
}

// syncer is the goroutine (run) that fsyncs the log for the raft
// goroutine. The queue is unbounded, so that the raft goroutine never
// waits to hand a job over; only the raft goroutine adds to it.
type syncer struct {
	n *Node

	mu   sync.Mutex
	jobs []syncJob // guarded by mu

	wake chan struct{} // cap 1: jobs were added
	done chan syncDone // to the raft goroutine
	quit chan struct{} // closed by the raft goroutine when it ends
	exit chan struct{} // closed when run returns
}

func newSyncer(n *Node) *syncer {
	return &syncer{n: n, wake: make(chan struct{}, 1), done: make(chan syncDone, 64),
		quit: make(chan struct{}), exit: make(chan struct{})}
}

// add queues j; on the raft goroutine.
func (s *syncer) add(j syncJob) {
	s.mu.Lock()
	s.jobs = append(s.jobs, j)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns every job waiting.
func (s *syncer) take() []syncJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs
	s.jobs = nil
	return j
}

// run is the syncer goroutine.
func (s *syncer) run() {
	defer close(s.exit)
	var failed error // a failed fsync cannot be retried: every later job fails
	for {
		select {
		case <-s.wake:
		case <-s.quit:
			return
		}
		jobs := s.take()
		if len(jobs) == 0 {
			continue
		}
		err := failed
		if err == nil {
			// The points come in the order written, so the last covers
			// the others: one fsync for all of them (none if they carry
			// nothing that is not durable already: a hard state alone).
			last := jobs[len(jobs)-1].point
			syncs := last.LSN() > s.n.wlog.SyncedLSN()
			start := time.Now()
			err = s.n.wlog.SyncFlushed(last)
			failed = err
			if err == nil && syncs {
				s.n.m.fsync.Observe(time.Since(start).Seconds())
			}
		}
		d := syncDone{jobs: len(jobs), err: err}
		if err == nil {
			ents, first := 0, time.Time{}
			for _, j := range jobs {
				ents += j.entries
				if j.entries > 0 {
					d.appended++
					if first.IsZero() {
						first = j.written
					}
				}
			}
			if ents > 0 {
				s.n.m.appendSync.Observe(time.Since(first).Seconds())
				s.n.m.entriesPer.Observe(float64(ents))
			}
			var remote []pb.Message
			for _, j := range jobs {
				for _, m := range j.resps {
					if m.To == s.n.id {
						d.local = append(d.local, m)
					} else {
						remote = append(remote, m)
					}
				}
			}
			if len(remote) > 0 {
				s.n.cfg.Transport.Send(remote)
			}
		}
		select {
		case s.done <- d:
		case <-s.quit:
			return
		}
	}
}

// stop ends the syncer, waiting for a sync in progress; on the raft
// goroutine, as it ends.
func (s *syncer) stop() {
	close(s.quit)
	<-s.exit
}
