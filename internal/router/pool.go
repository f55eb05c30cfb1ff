package router

import (
	crand "crypto/rand"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// pool keeps the router's connections to metadata servers: a few
// multiplexed rpc.Clients per address, dialed when an address first
// appears in the routing table and shared by every partition and version
// that names it. Its maps are guarded by mu; servers and partitions are
// safe for concurrent use. Its watchdog goroutine (liveness.go) finds
// servers that stopped answering without their connections breaking.
type pool struct {
	cfg     rpc.ClientConfig
	conns   int
	log     *slog.Logger
	metrics *metrics     // nil without a registry
	live    liveness     // set before the watchdog starts, then read-only
	router  rpc.ClientID // the router's id, which its connections' ids start with; zero: random ids (set before the first dial)

	mu      sync.Mutex
	closed  bool
	servers map[string]*server
	wg      sync.WaitGroup // dialing and probing goroutines, the watchdog
	stop    chan struct{}  // closed by close: the watchdog ends
}

func newPool(cfg rpc.ClientConfig, conns int, log *slog.Logger, m *metrics) *pool {
	return newPoolLiveness(cfg, conns, log, m, defaultLiveness)
}

// newPoolLiveness is newPool with the given liveness settings.
func newPoolLiveness(cfg rpc.ClientConfig, conns int, log *slog.Logger, m *metrics, live liveness) *pool {
	// A server's connections stay on that server: the partition decides
	// which replica of a group its calls go to (follow), and a connection
	// that moved itself to the leader a NOT_LEADER named (a stopped one,
	// say) would take the calls meant for its server with it.
	cfg.Pinned = true
	p := &pool{cfg: cfg, conns: conns, log: log, metrics: m, live: live,
		servers: make(map[string]*server), stop: make(chan struct{})}
	p.wg.Add(1)
	go p.watchdog()
	return p
}

// server is one metadata server's connections.
type server struct {
	p    *pool
	addr string

	clients atomic.Pointer[[]*rpc.Client] // nil until dialed
	next    atomic.Uint32                 // round robin over clients

	mu       sync.Mutex
	dialing  chan struct{} // closed when the dial in progress ends; nil if none
	lastFail time.Time

	health // liveness.go
}

// minRedial spaces out attempts to dial a server that refused.
const minRedial = 20 * time.Millisecond

// server returns the server at addr, creating it (undialed) if need be.
func (p *pool) server(addr string) *server {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[addr]
	if s == nil {
		s = &server{p: p, addr: addr}
		p.servers[addr] = s
	}
	return s
}

// client returns one of the server's connections, or nil if it has none
// yet; it then starts dialing in the background.
func (s *server) client() *rpc.Client {
	if cs := s.clients.Load(); cs != nil {
		list := *cs
		return list[int(s.next.Add(1))%len(list)]
	}
	s.dial()
	return nil
}

// dial starts dialing the server unless it is dialed, being dialed, or
// refused very recently, and returns a channel closed when the dial in
// progress ends (nil if none).
func (s *server) dial() <-chan struct{} {
	if s.clients.Load() != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dialing != nil {
		return s.dialing
	}
	if time.Since(s.lastFail) < minRedial {
		return nil
	}
	s.p.mu.Lock()
	if s.p.closed {
		s.p.mu.Unlock()
		return nil
	}
	s.p.wg.Add(1)
	s.p.mu.Unlock()
	done := make(chan struct{})
	s.dialing = done
	go func() {
		defer s.p.wg.Done()
		cs, err := s.connect()
		s.mu.Lock()
		if err != nil {
			s.lastFail = time.Now()
			s.p.log.Warn("cannot reach metadata server", "addr", s.addr, "err", err)
		} else {
			s.p.mu.Lock()
			closed := s.p.closed
			s.p.mu.Unlock()
			if closed {
				for _, c := range cs {
					c.Close()
				}
			} else {
				s.clients.Store(&cs)
			}
		}
		s.dialing = nil
		s.mu.Unlock()
		close(done)
	}()
	return done
}

func (s *server) connect() ([]*rpc.Client, error) {
	cs := make([]*rpc.Client, 0, s.p.conns)
	for range s.p.conns {
		cfg := s.p.cfg
		if s.p.router != (rpc.ClientID{}) {
			// The partition tells this router's connections by their id
			// (protocol.RouterConnID, server/session_end.go).
			var unique rpc.ClientID
			crand.Read(unique[:])
			cfg.ClientID = protocol.RouterConnID(s.p.router, unique)
		}
		c, err := rpc.Dial(s.addr, cfg)
		if err != nil {
			for _, c := range cs {
				c.Close()
			}
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// close closes the pool's connections and waits for dials in progress.
func (p *pool) close() {
	p.mu.Lock()
	if !p.closed {
		close(p.stop)
	}
	p.closed = true
	servers := p.servers
	p.mu.Unlock()
	p.wg.Wait()
	for _, s := range servers {
		if cs := s.clients.Load(); cs != nil {
			for _, c := range *cs {
				c.Close()
			}
		}
	}
}

// partition is a virtual partition as one version of the routing table
// serves it: its group's servers, the first of which calls go to until it
// fails.
type partition struct {
	vpart   uint16
	servers []*server
	cur     atomic.Uint32 // index of the server in use

	calls, errors prometheus.Counter // nil without metrics
}

// partition returns the partition vp as served by addrs.
func (p *pool) partition(vp uint16, addrs []string) *partition {
	pt := &partition{vpart: vp, servers: make([]*server, len(addrs))}
	for i, a := range addrs {
		pt.servers[i] = p.server(a)
	}
	if m := p.metrics; m != nil {
		label := strconv.Itoa(int(vp))
		pt.calls = m.partCalls.WithLabelValues(label)
		pt.errors = m.partErrors.WithLabelValues(label)
	}
	return pt
}

// client returns a connection to the group's server in use, or nil if it
// has none yet (it is then being dialed).
func (pt *partition) client() *rpc.Client {
	cl, _ := pt.clientAt()
	return cl
}

// clientAt is client, also returning the index of the server in use (for
// follow).
func (pt *partition) clientAt() (*rpc.Client, uint32) {
	at := pt.cur.Load()
	return pt.servers[int(at)%len(pt.servers)].client(), at
}

// follow moves the partition to its group's leader after the server at
// index at answered NOT_LEADER naming leader: to the server with that
// address, or, if the group has none such (an election, or a member the
// routing table does not list yet), to the next one; not to a server
// found silent lately (liveness.go). Only the first reply
// from the server in use moves it, so that concurrent replies do not spin
// the group round.
func (pt *partition) follow(at uint32, leader string) {
	next := at + 1
	if leader != "" {
		for i, s := range pt.servers {
			if s.addr == leader && !s.silent() {
				next = uint32(i)
				break
			}
		}
	}
	if pt.serverAt(next).silent() && len(pt.servers) > 2 {
		next++ // not back to a leader found stopped: one of the others is elected next
	}
	pt.cur.CompareAndSwap(at, next)
}

// failed moves the partition on to the next server of its group after a
// call could not reach the one at index at, if that is still the one in
// use (so that calls failing together move it once).
func (pt *partition) failed(at uint32) {
	if len(pt.servers) > 1 {
		pt.cur.CompareAndSwap(at, at+1)
	}
}

// warm dials the servers of v that have no connection yet, waiting for
// them at most until timeout.
func (p *pool) warm(v *view, timeout time.Duration) {
	var waits []<-chan struct{}
	seen := make(map[*server]bool)
	for _, pt := range v.parts {
		if pt == nil {
			continue
		}
		for _, s := range pt.servers {
			if !seen[s] {
				seen[s] = true
				if ch := s.dial(); ch != nil {
					waits = append(waits, ch)
				}
			}
		}
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-t.C:
			return
		}
	}
}
