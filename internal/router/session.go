package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Clients' sessions through the router. A partition knows a client
// behind a router only by the calls the router forwards for it (with the
// client's id), so it cannot see the client leave. The router can: it
// notes, per client, the partitions it forwarded calls to, and when the
// client's last connection to it closes it waits for those calls'
// replies and sends SESSION_END, forwarded for the client, to each of
// them. The partition then ends the session as on the close of a direct
// connection: the client's locks are released and the files it had open
// are closed by a logged session end (server/session_end.go), so a file
// unlinked while open is freed, on every replica of a group.
//
// A client that leaves this router for another (its connection here
// broke; it redialed the next of its addresses) is not ended: the
// router waits a moment (Config.SessionEndDelay) before it sends
// SESSION_END, the client's SDK sends its heartbeats at once through the
// router it reached, and a partition that heard the client through
// another router since refuses to end its session for this one
// (server/session_end.go): the session is the client's, and only its
// lease running out everywhere, or the router it is heard through now,
// ends it.
//
// Leases: a client keeps its locks and its opens alive with its own
// heartbeats, which the router forwards to the partitions holding them
// like any other call; the router adds none of its own, so a client that
// stops (SIGSTOP) loses its locks at the lock timeout, as it would
// directly. A router that closes or dies ends no session: its clients
// reconnect, to it or another router, and keep their sessions, renewed by
// their heartbeats through the router they reach now; the session of a
// client that went with the router ends at the partition when its lease
// runs out, one lock timeout after it was last heard (server/leases.go).

// sessionEndTimeout bounds the sending of one client's session ends: the
// wait for its calls in flight and the retries through a failover.
const sessionEndTimeout = 30 * time.Second

// clientConn is the rpc.Call.Identity of a client's connection to the
// router: the token the client presented, and the session its calls
// belong to.
type clientConn struct {
	token clientToken // nil if none

	// Owned by the connection's reader goroutine, which serves its calls.
	sess  *clientSession // the session of the client of the last call
	known []uint16       // the virtual partitions already noted in sess
	tab   *auth.Table    // the router's copy of the credentials cred was found in (creds.go)
	cred  *auth.Credential
}

// tokenOf returns the token of the connection c came on, or nil.
func tokenOf(c *rpc.Call) clientToken {
	if cc, ok := c.Identity.(*clientConn); ok {
		return cc.token
	}
	return nil
}

// clientSession is what the router knows of one client's session: the
// virtual partitions its calls went to and how many are in flight. Any
// goroutine may use it; mu guards parts.
type clientSession struct {
	client   rpc.ClientID
	inflight atomic.Int64

	mu    sync.Mutex
	parts []uint16
}

// add notes that a call of the session went to vp.
func (s *clientSession) add(vp uint16) {
	s.mu.Lock()
	if !slices.Contains(s.parts, vp) {
		s.parts = append(s.parts, vp)
	}
	s.mu.Unlock()
}

// sessions is the router's table of client sessions, by client id; mu
// guards it, any goroutine may use it.
type sessions struct {
	mu sync.Mutex
	m  map[rpc.ClientID]*clientSession
}

// get returns client's session, creating it if need be.
func (t *sessions) get(client rpc.ClientID) *clientSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[rpc.ClientID]*clientSession)
	}
	s := t.m[client]
	if s == nil {
		s = &clientSession{client: client}
		t.m[client] = s
	}
	return s
}

// take removes client's session and returns it (nil if it has none).
func (t *sessions) take(client rpc.ClientID) *clientSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.m[client]
	delete(t.m, client)
	return s
}

// note records that call c is being forwarded to vp, on the reader
// goroutine of c's connection, and returns the session to count it in
// flight in (nil for a call without a client connection's identity).
// The table is consulted only for a connection's first call and for the
// first call of a client to each partition.
func (r *Router) note(c *rpc.Call, vp uint16) *clientSession {
	cc, _ := c.Identity.(*clientConn)
	if cc == nil {
		return nil
	}
	r.sessionOf(cc, c.Client)
	if !slices.Contains(cc.known, vp) {
		cc.known = append(cc.known, vp)
		cc.sess.add(vp)
	}
	cc.sess.inflight.Add(1)
	return cc.sess
}

// sessionOf returns client's session, the one cc's calls belong to, on
// the reader goroutine of cc.
func (r *Router) sessionOf(cc *clientConn, client rpc.ClientID) *clientSession {
	if cc.sess == nil || cc.sess.client != client {
		cc.sess, cc.known = r.sessions.get(client), cc.known[:0]
	}
	return cc.sess
}

// clientGone is the router's rpc.ServerConfig.OnClientGone: the client's
// last connection closed, so its session ends at every partition it
// reached, on a goroutine of its own.
func (r *Router) clientGone(client rpc.ClientID) {
	s := r.sessions.take(client)
	if s == nil || r.ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	parts := slices.Clone(s.parts)
	s.mu.Unlock()
	if len(parts) == 0 {
		return
	}
	r.slow.Add(1)
	go func() {
		defer r.slow.Done()
		ctx, cancel := context.WithTimeout(r.ctx, sessionEndTimeout)
		defer cancel()
		r.endSession(ctx, s, parts)
	}()
}

// errSessionEnd is the error of a SESSION_END a partition refused.
var errSessionEnd = errors.New("session end refused")

// endSession waits for the calls of s in flight, then ends s at each of
// parts, retrying each until it is answered or ctx ends.
func (r *Router) endSession(ctx context.Context, s *clientSession, parts []uint16) {
	for s.inflight.Load() > 0 {
		if !sleepCtx(ctx, time.Millisecond) {
			r.log.Warn("client's calls still in flight; its session is not ended", "client", s.client.String())
			return
		}
	}
	if d := r.cfg.SessionEndDelay; d > 0 && !sleepCtx(ctx, d) {
		return
	}
	if r.srv.Connected(s.client) {
		// Back through this router meanwhile: the session goes on here.
		back := r.sessions.get(s.client)
		for _, vp := range parts {
			back.add(vp)
		}
		return
	}
	for _, vp := range parts {
		if err := r.endSessionAt(ctx, s.client, vp); err != nil {
			r.log.Warn("session of departed client not ended", "client", s.client.String(), "vpart", vp, "err", err)
			continue
		}
		r.sessionEnds.Add(1)
		if m := r.metrics; m != nil {
			m.sessionEnds.Inc()
		}
		r.log.Debug("session of departed client ended", "client", s.client.String(), "vpart", vp)
	}
}

// endSessionAt sends SESSION_END for client to virtual partition vp.
func (r *Router) endSessionAt(ctx context.Context, client rpc.ClientID, vp uint16) error {
	return r.callPart(ctx, vp, &origin{client: client}, pb.Method_SESSION_END, nil)
}

// callPart makes the router's own call m, forwarded for o, to virtual
// partition vp of the tables in use, following the group's leader, until
// it is answered or ctx ends. A partition that is no longer routed takes
// nothing.
func (r *Router) callPart(ctx context.Context, vp uint16, o *origin, m pb.Method, req []byte) error {
	var last error
	for pause := time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		pt := r.view.Load().parts[vp]
		if pt == nil {
			return nil // the partition is no longer routed: nothing to end
		}
		cl, at := pt.clientAt()
		if cl != nil {
			status, reply, err := forwardWait(ctx, cl, o, m, rpc.Cred{}, req, markIn(ctx))
			switch {
			case err != nil:
				last = err
				if !errors.Is(err, rpc.ErrClosed) {
					pt.failed(at)
				}
			case status == rpc.StatusNotLeader:
				pt.follow(at, string(reply))
				last = &rpc.StatusError{Status: status}
			case status == 0:
				return nil
			case rpc.Retriable(status):
				if status == rpc.StatusUnavailable {
					pt.follow(at, "")
				}
				last = &rpc.StatusError{Status: status}
			default:
				return fmt.Errorf("%w: status %d", errSessionEnd, status)
			}
		}
		if !sleepCtx(ctx, pause) {
			return errors.Join(last, ctx.Err())
		}
	}
}

// sleepCtx sleeps for d, reporting false if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
