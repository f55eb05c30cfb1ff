package router

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// A metadata server can stop answering without its connections breaking:
// a process stopped by SIGSTOP (its kernel still accepts and holds what is
// sent to it), or a link that silently drops everything. rpc.Client.Forward
// has no timeout, so the calls the router forwards to such a server would
// wait for it for as long as it is silent, and so would every call after
// them, since the partition keeps its server in use until a call fails.
//
// The pool's watchdog goroutine therefore looks at every server each
// liveness.every. A server that has forwarded calls outstanding and has
// finished none of them for liveness.quiet looks in a row is probed: each
// of its connections gets a NULL call, which a metadata server answers on
// its connection's reader goroutine, ahead of any queue. A connection that
// does not answer its probe within liveness.timeout is abandoned
// (rpc.Client.Abandon): the calls on it fail, the router answers them
// UNAVAILABLE when the server is one replica of a group (BUSY when it is
// the partition's only server) and moves the partition to the group's next
// replica; the clients retry with the same call ids, and that replica
// serves them or answers NOT_LEADER naming the new leader. A server that
// is merely slow (a long fsync, a leader waiting for its quorum) answers
// its probe and keeps its calls. A stopped old leader never answers a
// client once a new leader exists (its reads need a quorum's confirmation
// and its writes a quorum's acknowledgment), so moving on is always safe;
// it only decides how soon clients see the new leader. A server found
// silent is not followed to for a while (silentHold), and is probed at
// every look until all its connections answer again, which ends that at
// once: the next leader may well be a replica found silent a moment ago.

// liveness holds the watchdog's settings.
type liveness struct {
	every   time.Duration // between looks at every server
	quiet   int           // looks in a row with calls outstanding and none finished before a probe
	timeout time.Duration // how long a probe waits for its answer
}

// defaultLiveness finds a silent server in about 0.2 to 0.3 s of silence
// plus a probe of 0.4 s: within a replica group's election timeout, so that
// the router has moved on by the time a new leader can be elected.
var defaultLiveness = liveness{every: 100 * time.Millisecond, quiet: 2, timeout: 400 * time.Millisecond}

// health is a server's liveness bookkeeping. sent and finished are
// counted by the goroutines forwarding calls and receiving their replies;
// seen and looks belong to the watchdog goroutine; probing is set by the
// watchdog and cleared by the probe's goroutine.
type health struct {
	sent, finished atomic.Uint64 // forwarded calls sent to the server and finished

	seen  uint64 // finished at the watchdog's last look
	looks int    // looks in a row that found calls outstanding and none finished

	probing atomic.Bool

	// silentUntil (monotime) is set by a probe that found the server
	// silent: until then a NOT_LEADER naming it is not followed (follow),
	// since the group's other replicas go on naming a stopped leader until
	// they elect another, and the partition would go back to it and wait
	// out its silence again. The watchdog probes such a server at every
	// look, and clears it (0) once every connection answers a probe.
	silentUntil atomic.Int64
}

// silentHold is how long a server found silent is not gone back to on
// another replica's word: longer than an election, so that the others
// name the new leader by then.
const silentHold = 3 * time.Second

// silent reports whether s was found silent within the last silentHold.
func (s *server) silent() bool { return monotime() < s.silentUntil.Load() }

// serverAt is the server at index at of the partition's group.
func (pt *partition) serverAt(at uint32) *server {
	return pt.servers[int(at)%len(pt.servers)]
}

// sending counts a call forwarded to the server at index at, before it is
// handed to the connection.
func (pt *partition) sending(at uint32) { pt.serverAt(at).sent.Add(1) }

// finished counts a call forwarded to the server at index at that got its
// reply or failed.
func (pt *partition) finished(at uint32) { pt.serverAt(at).finished.Add(1) }

// lost moves the partition on after a call to the server at index at
// failed without a reply (its connection broke or was abandoned), and
// returns the status to answer the call with: UNAVAILABLE in a group,
// which clients retry for as long as their deadline allows, as through an
// election; BUSY for a partition with one server. Only the first failure
// on the server in use moves the partition, so that the calls failing
// together on one connection do not spin the group round.
func (pt *partition) lost(at uint32) uint32 {
	if len(pt.servers) == 1 {
		return rpc.StatusBusy
	}
	pt.cur.CompareAndSwap(at, at+1)
	return rpc.StatusUnavailable
}

// watchdog is the pool's goroutine that looks at its servers every
// live.every until the pool closes.
func (p *pool) watchdog() {
	defer p.wg.Done()
	t := time.NewTicker(p.live.every)
	defer t.Stop()
	var list []*server
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		list = list[:0]
		p.mu.Lock()
		for _, s := range p.servers {
			list = append(list, s)
		}
		p.mu.Unlock()
		for _, s := range list {
			s.look()
		}
	}
}

// look is one look of the watchdog at the server: it starts a probe of
// its connections after live.quiet looks in a row found forwarded calls
// outstanding and none of them finished.
func (s *server) look() {
	h := &s.health
	if s.silent() {
		// Found silent lately: probe it at every look, so that a server
		// that answers again (continued, or elected leader while it was
		// still held silent) is followed to at once.
		if !h.probing.Load() {
			s.startProbe(0)
		}
		return
	}
	finished := h.finished.Load() // before sent: sent >= finished
	sent := h.sent.Load()
	if sent == finished || finished != h.seen {
		h.seen, h.looks = finished, 0
		return
	}
	h.looks++
	if h.looks < s.p.live.quiet || h.probing.Load() {
		return
	}
	h.looks = 0
	s.startProbe(sent - finished)
}

// startProbe starts a probe of the server's connections, outstanding the
// forwarded calls found waiting on it.
func (s *server) startProbe(outstanding uint64) {
	h := &s.health
	cs := s.clients.Load()
	if cs == nil {
		return
	}
	s.p.mu.Lock()
	if s.p.closed {
		s.p.mu.Unlock()
		return
	}
	s.p.wg.Add(1)
	s.p.mu.Unlock()
	h.probing.Store(true)
	go s.probe(*cs, outstanding)
}

// probe sends a NULL call on each of the server's connections, in
// parallel, and abandons those that do not answer within live.timeout.
// outstanding is the number of calls the watchdog found waiting, for the
// log.
func (s *server) probe(cs []*rpc.Client, outstanding uint64) {
	defer s.p.wg.Done()
	defer s.health.probing.Store(false)
	timeout := s.p.live.timeout
	// Each connection reports whether it answered, and whether it was
	// found silent (no answer in time); one that could not be reached
	// is neither: a broken connection is noticed by the calls on it.
	type outcome struct{ answered, silent bool }
	outcomes := make(chan outcome, len(cs))
	for _, c := range cs {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_, _, err := c.Call(ctx, uint16(pb.Method_NULL), rpc.Cred{}, nil)
			// Any answer, even a refusal, shows the server alive.
			if err != nil && errors.Is(err, rpc.ErrTimeout) {
				c.Abandon(fmt.Errorf("%w: %s did not answer a probe within %v, with %d calls outstanding",
					rpc.ErrSilent, s.addr, timeout, outstanding))
			}
			outcomes <- outcome{answered: err == nil, silent: err != nil && errors.Is(err, rpc.ErrTimeout)}
		}()
	}
	n, answered := 0, 0
	for range cs {
		o := <-outcomes
		if o.silent {
			n++
		}
		if o.answered {
			answered++
		}
	}
	switch {
	case n > 0 && !s.silent():
		s.p.log.Warn("metadata server silent: its calls fail over to its group's next replica",
			"addr", s.addr, "connections", n, "calls_outstanding", outstanding, "probe_timeout", timeout)
		fallthrough
	case n > 0:
		s.silentUntil.Store(monotime() + int64(silentHold))
	case answered == len(cs) && s.silentUntil.Load() != 0:
		s.silentUntil.Store(0)
		s.p.log.Info("metadata server answers again", "addr", s.addr)
	}
}
