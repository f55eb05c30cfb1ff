package client

// A client given several servers (a group's replicas, or routers:
// "--addr A1,A2,A3") must not wait on one that stopped answering while
// its connection stays open — a process stopped by SIGSTOP, whose kernel
// still accepts and holds what is sent to it. Per-call timeouts alone
// would retry the calls on the same connection. So a watchdog goroutine
// looks at the client's calls every liveness.every: after liveness.quiet
// looks in a row that found calls outstanding and none finished, it
// probes the connection with a NULL call, which a metadata server (and a
// router) answers on its connection's reader, ahead of any queue; a
// connection that does not answer within liveness.timeout is abandoned
// (rpc.Client.Abandon). The calls on it are retried, with their call ids,
// on the next server, which serves them or answers NOT_LEADER naming the
// new leader. A server that is merely slow — a long fsync, a leader
// waiting for its quorum — answers the probe and keeps its calls; a
// stopped old leader never answers a call once a new leader exists, so
// moving on is always safe.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// liveness holds the watchdog's settings.
type liveness struct {
	every   time.Duration // between looks
	quiet   int           // looks in a row with calls outstanding and none finished before a probe
	timeout time.Duration // how long a probe waits for its answer
}

// defaultLiveness notices a silent server after 0.3 to 0.4 s with calls
// waiting, plus a probe of up to 1 s: a replica that is loaded, not
// stopped, answers a NULL well within that, and a client that moved on
// finds the new leader about when the group has elected it.
var defaultLiveness = liveness{every: 100 * time.Millisecond, quiet: 3, timeout: time.Second}

// watchdog counts the client's calls and runs the watchdog goroutine
// (run). sent and finished are counted by the calling goroutines; seen and
// looks belong to the watchdog goroutine.
type watchdog struct {
	rc   *rpc.Client
	live liveness
	log  *slog.Logger

	sent, finished atomic.Uint64

	seen  uint64
	looks int

	probes    atomic.Uint64 // probes sent
	abandoned atomic.Uint64 // connections abandoned

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func startWatchdog(rc *rpc.Client, live liveness, log *slog.Logger) *watchdog {
	w := &watchdog{rc: rc, live: live, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// begin and end bracket one call; safe on a nil watchdog.
func (w *watchdog) begin() {
	if w != nil {
		w.sent.Add(1)
	}
}

func (w *watchdog) end() {
	if w != nil {
		w.finished.Add(1)
	}
}

func (w *watchdog) run() {
	defer close(w.done)
	t := time.NewTicker(w.live.every)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		if w.look() {
			w.probe()
		}
	}
}

// look reports whether the connection is to be probed: calls have been
// outstanding, none finishing, for live.quiet looks in a row.
func (w *watchdog) look() bool {
	finished := w.finished.Load() // before sent: sent >= finished
	sent := w.sent.Load()
	if sent == finished || finished != w.seen {
		w.seen, w.looks = finished, 0
		return false
	}
	w.looks++
	return w.looks >= w.live.quiet
}

// probe sends a NULL call and abandons the connection if it goes
// unanswered within live.timeout. It runs on the watchdog goroutine:
// no look is taken meanwhile.
func (w *watchdog) probe() {
	w.probes.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), w.live.timeout)
	defer cancel()
	_, _, err := w.rc.Call(ctx, uint16(pb.Method_NULL), rpc.Cred{}, nil)
	w.looks = 0
	// Any answer, even a refusal, shows the server alive; a broken
	// connection is noticed by the calls on it.
	if err == nil || !errors.Is(err, rpc.ErrTimeout) {
		return
	}
	select {
	case <-w.stop:
		return // closing: the timeout may be Close's doing
	default:
	}
	w.abandoned.Add(1)
	w.log.Warn("server silent: moving to the next one", "probe_timeout", w.live.timeout)
	w.rc.Abandon(fmt.Errorf("%w: no answer to a probe within %v", rpc.ErrSilent, w.live.timeout))
}

// close stops the watchdog goroutine and waits for it; safe on a nil
// watchdog and more than once.
func (w *watchdog) close() {
	if w == nil {
		return
	}
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}
