package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ServerConfig configures a Server. The zero value serves without
// authentication, with the defaults below.
type ServerConfig struct {
	Secret string // clients must present it in their hello; "" = no authentication

	// Authenticate, if set, is called with the token a client presents in
	// its hello (empty if none, or if the client speaks a version before
	// 4) and the connection's remote address, after the secret was
	// checked. An error refuses the client with StatusUnauthenticated;
	// otherwise what it returns is every call's Identity on that
	// connection. It runs on the connection's reader goroutine.
	Authenticate func(token []byte, remote net.Addr) (any, error)

	// AuthenticateCert, if set, is called instead of Authenticate for a
	// hello without a token on a TLS connection whose client presented a
	// certificate the handshake verified (TLS.ClientAuth asks for one
	// and TLS.ClientCAs holds its CA), with that certificate. Its result
	// is as Authenticate's.
	AuthenticateCert func(cert *x509.Certificate, remote net.Addr) (any, error)

	// MaxFrame is the longest frame accepted and sent; default
	// DefaultMaxFrame, at least 1 KiB.
	MaxFrame int

	// MaxInflight is the number of calls a connection may have in flight:
	// read, but with their replies not yet written. Beyond it the
	// connection's reader stops reading, and TCP pushes back on the client.
	// Default 4096.
	MaxInflight int

	// IdleTimeout closes a connection that has had no call in flight and no
	// traffic for this long; it also bounds how long a write may block
	// (a write blocked for 7/8 of it may already fail). Default 5m.
	IdleTimeout time.Duration

	// HandshakeTimeout bounds the hello/welcome exchange. Default 5s.
	HandshakeTimeout time.Duration

	Logger *slog.Logger // default slog.Default()

	// TLS, if set, makes the server speak TLS: every accepted connection
	// completes a TLS handshake, within HandshakeTimeout, before the hello.
	TLS *tls.Config

	// CompressAbove is the payload size, in bytes, above which replies are
	// compressed on connections that negotiated a codec; a compressed form
	// is sent only if it is smaller. 0 means DefaultCompressAbove (4 KiB);
	// negative turns compression off: the server then accepts no codec,
	// and its clients do not compress either.
	CompressAbove int

	// Codecs are the codecs the server accepts from a client's offer, a
	// bitmask; 0 means AllCodecs. Of those offered, the server picks S2
	// first.
	Codecs Codec

	// Queues, if set, puts calls in bounded queues served by a pool of
	// handler goroutines, for handlers that may block. Nil hands every call
	// to the Handler on its connection's reader goroutine.
	Queues *QueueConfig

	// Metrics, if set, receives the server's Prometheus metrics, named
	// canopy_rpc_*. Servers sharing a registerer add up their metrics; to
	// tell them apart, wrap it with prometheus.WrapRegistererWith.
	Metrics prometheus.Registerer

	// OnClientGone, if set, is called with a client's id when the last of
	// its connections that completed the handshake closes: a service can
	// then release what it holds for that client. It runs on the closing
	// connection's reader goroutine, after the last call that connection
	// read was handed on (to the Handler, or to a queue with Queues), and
	// before Close or Shutdown return. A client that reconnects later with
	// the same id is a new arrival.
	OnClientGone func(ClientID)

	// MethodName names methods in the method label of the metrics; methods
	// it returns "" for, or all without it, are labelled with their number.
	// It is called once per method.
	MethodName func(method uint16) string
}

func (cfg *ServerConfig) setDefaults() {
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	cfg.MaxFrame = max(cfg.MaxFrame, minMaxFrame)
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = 4096
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Queues != nil {
		q := *cfg.Queues // the caller's stays as it is
		q.setDefaults()
		cfg.Queues = &q
	}
}

// Server accepts connections and hands their calls to a Handler.
type Server struct {
	h       Handler
	cfg     ServerConfig
	log     *slog.Logger
	comp    *compression
	queues  *dispatcher    // nil without ServerConfig.Queues
	metrics *serverMetrics // nil without ServerConfig.Metrics

	// badHellos rate-limits the log lines of failed handshakes.
	badHellos *LogLimiter

	// shuttingDown makes readers answer new calls with StatusShuttingDown.
	shuttingDown atomic.Bool

	mu        sync.Mutex
	closed    bool // no more listeners or connections are taken on
	done      chan struct{}
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	clients   map[ClientID]int // connections past the handshake, per client

	// wg counts every connection goroutine, readers and writers.
	wg sync.WaitGroup
}

// NewServer returns a Server that hands calls to h. With queues configured,
// it starts the handler goroutines at once; Close or Shutdown stops them.
func NewServer(h Handler, cfg ServerConfig) *Server {
	cfg.setDefaults()
	s := &Server{
		h:         h,
		cfg:       cfg,
		log:       cfg.Logger,
		comp:      newCompression(cfg.Codecs, cfg.CompressAbove, cfg.MaxFrame),
		metrics:   newServerMetrics(cfg.Metrics, cfg.Queues != nil, cfg.MethodName, cfg.Logger),
		done:      make(chan struct{}),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		clients:   make(map[ClientID]int),
		badHellos: NewLogLimiter(badHelloLines, 4*badHelloLines),
	}
	if cfg.Queues != nil {
		s.queues = newDispatcher(h, *cfg.Queues, s.metrics)
	}
	return s
}

// Serve accepts connections on ln until the server is shut down or closed,
// and then returns nil. It closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()

	var pause time.Duration // after a failed accept
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accept: %w", err)
			}
			// Out of file descriptors, an aborted connection...: wait and
			// try again, as the condition may pass.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", "err", err, "in", pause)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return nil
			}
			continue
		}
		pause = 0
		s.start(nc)
	}
}

// start registers a new connection and starts its reader goroutine.
func (s *Server) start(nc net.Conn) {
	nc = newSysConn(nc)
	if m := s.metrics; m != nil {
		nc = &countingConn{Conn: nc, read: m.readBytes, written: m.writtenBytes}
	}
	if s.cfg.TLS != nil {
		nc = tls.Server(nc, s.cfg.TLS) // the handshake runs on the reader goroutine
	}
	c := newConn(s, nc)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	if m := s.metrics; m != nil {
		m.connections.Inc()
	}
	go c.readLoop()
}

// join counts a connection whose handshake named its client.
func (s *Server) join(c *conn) {
	s.mu.Lock()
	s.clients[c.client]++
	c.joined = true
	s.mu.Unlock()
}

// forget removes a connection whose reader goroutine is exiting, and
// reports its client gone if it was the client's last connection.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	gone := false
	if c.joined {
		c.joined = false
		if s.clients[c.client]--; s.clients[c.client] <= 0 {
			delete(s.clients, c.client)
			gone = true
		}
	}
	s.mu.Unlock()
	if m := s.metrics; m != nil {
		m.connections.Dec()
	}
	if gone && s.cfg.OnClientGone != nil {
		s.cfg.OnClientGone(c.client)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// stopAccepting closes the listeners; Serve returns nil.
func (s *Server) stopAccepting() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.done)
	var errs []error
	for ln := range s.listeners {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("close listener %v: %w", ln.Addr(), err))
		}
	}
	return errors.Join(errs...)
}

// Shutdown stops accepting connections, answers new calls with
// StatusShuttingDown, waits until every call in flight (queued ones
// included) has been replied to and its reply written, closes the
// connections and stops the handler goroutines. If ctx ends first, it
// closes everything at once, as Close does, and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shuttingDown.Store(true)
	err := s.stopAccepting()

	// Poll, as there is no event for "the last reply was written" across
	// connections; a shutdown is rare and the interval stays short.
	interval := time.Millisecond
	t := time.NewTimer(interval)
	defer t.Stop()
	for !s.closeIdle() {
		select {
		case <-ctx.Done():
			s.Close()
			return fmt.Errorf("shutdown: %w", ctx.Err())
		case <-t.C:
		}
		interval = min(2*interval, 50*time.Millisecond)
		t.Reset(interval)
	}
	s.wg.Wait()
	s.stopHandlers()
	return err
}

// closeIdle closes every connection with no call in flight, and reports
// whether that was all of them.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	idle := true
	for c := range s.conns {
		if c.inflight() == 0 {
			c.close()
		} else {
			idle = false
		}
	}
	return idle
}

// Close stops accepting, closes every connection at once and waits for
// their goroutines to exit. Replies to calls still in a handler's hands are
// dropped. With queues, it also stops the handler goroutines, waiting for
// those in the Handler to return, and drops the calls still queued.
func (s *Server) Close() error {
	err := s.stopAccepting()
	s.mu.Lock()
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.stopHandlers()
	return err
}

// stopHandlers stops the handler goroutines, once no reader is left to
// queue calls.
func (s *Server) stopHandlers() {
	if s.queues != nil {
		s.queues.close()
	}
}
