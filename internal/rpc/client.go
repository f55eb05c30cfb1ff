package rpc

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// ClientConfig configures a Client. The zero value works against a server
// without a secret.
type ClientConfig struct {
	Secret   string   // presented in the hello
	Token    string   // credential token presented in the hello (version 4 on); "" = none
	ClientID ClientID // zero = random

	// CallTimeout bounds one attempt of a call; default 10s. A sooner
	// deadline on the call's context wins. It also bounds how long a
	// write to the connection may block: a write blocked that long (7/8
	// of it at least) breaks the connection, and the calls in flight on it
	// are retried.
	CallTimeout time.Duration

	// OpTimeout bounds a call across all its attempts; default 30s.
	OpTimeout time.Duration

	// MaxRetries is how many times a call is sent again after its first
	// attempt; default 5, negative for none.
	MaxRetries int

	DialTimeout time.Duration // bounds dialing and the handshake; default 5s

	// MaxFrame is the longest frame sent or accepted; default
	// DefaultMaxFrame, at least 1 KiB. It should match the server's.
	MaxFrame int

	Logger *slog.Logger // default slog.Default()

	// TLS, if set, makes the client speak TLS, completing a TLS handshake
	// before the hello. Without a ServerName (and unless
	// InsecureSkipVerify), the host of the address dialed is verified.
	TLS *tls.Config

	// CompressAbove is the payload size, in bytes, above which calls are
	// compressed on connections that negotiated a codec; a compressed form
	// is sent only if it is smaller. 0 means DefaultCompressAbove (4 KiB);
	// negative turns compression off: the client then offers no codec, and
	// the server does not compress its replies either.
	CompressAbove int

	// Codecs are the codecs the client offers in its hello, a bitmask; 0
	// means AllCodecs.
	Codecs Codec

	// RateLimit, if positive, limits the calls sent to this many a second,
	// retries included: each attempt first takes a token from a token
	// bucket, waiting for one if need be. An attempt whose token would come
	// after the call's deadline fails at once with ErrTimeout.
	RateLimit float64

	// RateBurst is the token bucket's size: how many calls may go without
	// waiting after a quiet spell. Default a tenth of a second's worth of
	// RateLimit, at least 1.
	RateBurst int

	// Early marks every call the client makes (but not those it forwards)
	// as one to be answered once its change is applied and ordered, before
	// it is durable, on connections that speak protocol version 5 or
	// later; on older ones calls go unmarked. See Call.Early.
	Early bool

	// Metrics, if set, receives the client's Prometheus metrics, named
	// canopy_rpc_client_*. Clients sharing a registerer add up their
	// metrics.
	Metrics prometheus.Registerer

	// Pinned keeps the client on the one server it was dialed to: a
	// NOT_LEADER reply is the call's result (status StatusNotLeader, the
	// reply the leader's address), for a caller that routes among a
	// group's replicas itself, as a router's pool does, to act on. Without
	// it the client moves to the leader the reply names and sends the
	// call again.
	Pinned bool

	// OnBroken, if set, is called when a connection of the client
	// breaks other than by Close (the server went, or the network), even
	// while it is idle: the client redials with its next call, which the
	// caller may then make at once. It runs on the goroutine that found
	// the break and must not block.
	OnBroken func()
}

func (cfg *ClientConfig) setDefaults() error {
	if cfg.ClientID == (ClientID{}) {
		if _, err := crand.Read(cfg.ClientID[:]); err != nil {
			return fmt.Errorf("make client id: %w", err)
		}
	}
	if len(cfg.Secret) > maxSecret {
		return fmt.Errorf("secret of %d bytes, limit %d", len(cfg.Secret), maxSecret)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 30 * time.Second
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = 5
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	cfg.MaxFrame = max(cfg.MaxFrame, minMaxFrame)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RateLimit > 0 && cfg.RateBurst <= 0 {
		cfg.RateBurst = max(1, int(cfg.RateLimit/10))
	}
	return nil
}

// Backoff between attempts: full jitter over an exponential ceiling.
const (
	backoffBase = time.Millisecond
	backoffCap  = time.Second
)

// backoff returns the pause before retry number attempt+1.
func backoff(attempt int) time.Duration {
	ceiling := backoffCap
	if attempt < 10 {
		ceiling = min(backoffBase<<attempt, backoffCap)
	}
	return rand.N(ceiling) + 1
}

// Pauses between attempts while a group has no leader: short, so that a
// call goes on soon after an election ends, and bounded below, so that a
// client does not spin.
const (
	failoverBase = 2 * time.Millisecond
	failoverCap  = 50 * time.Millisecond
)

// failoverBackoff returns the pause before attempt n+1 of a call whose
// group is electing a leader: jittered over the upper half of an
// exponential ceiling.
func failoverBackoff(n int) time.Duration {
	ceiling := failoverCap
	if n < 5 {
		ceiling = min(failoverBase<<n, failoverCap)
	}
	return ceiling/2 + rand.N(ceiling/2) + 1
}

// maxServers bounds the servers a client learns of from NOT_LEADER
// replies, so that a confused or hostile server cannot grow the list
// without end.
const maxServers = 16

// Client calls one server over a single multiplexed connection, redialing
// when it breaks. Given several interchangeable servers (DialAny), it keeps
// to one and moves to the next when that one cannot be reached. It is safe
// for concurrent use.
type Client struct {
	addrs   []string     // the servers, tried in turn; grown under mu by follow
	at      atomic.Int64 // index in addrs of the server connected last, or to connect to next
	cfg     ClientConfig
	log     *slog.Logger
	tls     *tls.Config // cfg.TLS; nil without TLS
	comp    *compression
	limiter *rate.Limiter  // nil without RateLimit
	metrics *clientMetrics // nil without Metrics

	nextID atomic.Uint64 // the last call id handed out

	// cur is the connection calls go to. It is replaced, under mu, only by
	// a redial once it has broken.
	cur atomic.Pointer[clientConn]

	// ctx is cancelled by Close, aborting a dial in progress.
	ctx    context.Context
	cancel context.CancelFunc

	mu          sync.Mutex
	closed      bool
	dialing     *dialing // the redial in progress, if any
	handshaking net.Conn // the connection in its handshake, for Close to abort

	// wg counts the redial goroutine and every connection's reader and
	// writer.
	wg sync.WaitGroup
}

// dialing is one redial; done is closed when cn or err is set.
type dialing struct {
	done chan struct{}
	cn   *clientConn
	err  error
}

// Dial connects to the server at addr and completes the handshake. A
// refused secret yields an error for which errors.Is(err,
// ErrUnauthenticated) holds.
func Dial(addr string, cfg ClientConfig) (*Client, error) {
	return DialAny([]string{addr}, cfg)
}

// DialAny is Dial for a set of interchangeable servers (routers in front of
// the same partitions): it connects to the first that answers, in order.
// When the connection breaks, the redial tries the same server first and
// then the others in turn, so calls in flight are retried, with their call
// ids, on the next server that answers.
func DialAny(addrs []string, cfg ClientConfig) (*Client, error) {
	name := strings.Join(addrs, ",")
	if len(addrs) == 0 {
		return nil, errors.New("dial: no address")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, fmt.Errorf("dial %s: %w", name, err)
	}
	c := &Client{
		addrs:   slices.Clone(addrs),
		cfg:     cfg,
		log:     cfg.Logger.With("server", name),
		tls:     cfg.TLS,
		comp:    newCompression(cfg.Codecs, cfg.CompressAbove, cfg.MaxFrame),
		metrics: newClientMetrics(cfg.Metrics, cfg.Logger),
	}
	for _, addr := range addrs {
		if _, err := c.tlsFor(addr); err != nil {
			return nil, err
		}
	}
	if cfg.RateLimit > 0 {
		c.limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit), cfg.RateBurst)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	cn, err := c.connect()
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.cur.Store(cn)
	return c, nil
}

// ID returns the id the client presents to the server.
func (c *Client) ID() ClientID { return c.cfg.ClientID }

// Close fails calls in flight with ErrClosed, closes the connection and
// waits for the client's goroutines to exit.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	if c.handshaking != nil {
		c.handshaking.Close()
	}
	c.mu.Unlock()
	c.cancel()
	if cn := c.cur.Load(); cn != nil {
		cn.fail(ErrClosed)
	}
	c.wg.Wait()
	return nil
}

// tlsFor returns the TLS configuration for dialing addr: without a
// ServerName (and unless InsecureSkipVerify), the host of addr is verified.
func (c *Client) tlsFor(addr string) (*tls.Config, error) {
	if c.tls == nil || c.tls.ServerName != "" || c.tls.InsecureSkipVerify {
		return c.tls, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: server name for TLS: %w", addr, err)
	}
	t := c.tls.Clone()
	t.ServerName = host
	return t, nil
}

// connect connects to one of the servers: the one connected last, then the
// others in turn. With one server, its error is returned as it is; with
// several, the errors of all.
func (c *Client) connect() (*clientConn, error) {
	c.mu.Lock()
	addrs := slices.Clone(c.addrs)
	c.mu.Unlock()
	start := int(c.at.Load()) % len(addrs)
	var errs []error
	for i := range addrs {
		k := (start + i) % len(addrs)
		cn, err := c.connectAddr(addrs[k])
		if err == nil {
			if k != start {
				c.log.Debug("moved to another server", "addr", addrs[k])
			}
			c.at.Store(int64(k))
			return cn, nil
		}
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, errors.Join(errs...)
}

// connectAddr dials addr, handshakes and starts the connection's
// goroutines. It offers the newest protocol version first; a server that
// refuses it for an older one it speaks is dialed again with that one.
func (c *Client) connectAddr(addr string) (*clientConn, error) {
	version := protocolVersion
	for {
		cn, w, err := c.connectVersion(addr, version)
		if err != nil && w.status == StatusBadVersion && spoken(w.version) && w.version < version {
			c.log.Debug("server speaks an older protocol version; dialing again", "version", w.version)
			version = w.version
			continue
		}
		return cn, err
	}
}

// connectVersion dials, handshakes with the given version and starts the
// connection's goroutines. It returns the server's welcome, if it got one.
func (c *Client) connectVersion(addr string, version uint16) (*clientConn, welcome, error) {
	tlsCfg, err := c.tlsFor(addr)
	if err != nil {
		return nil, welcome{}, err
	}
	d := net.Dialer{Timeout: c.cfg.DialTimeout}
	nc, err := d.DialContext(c.ctx, "tcp", addr)
	if err != nil {
		return nil, welcome{}, fmt.Errorf("dial %s: %w", addr, err)
	}
	nc = newSysConn(nc)
	if tlsCfg != nil {
		nc = tls.Client(nc, tlsCfg)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, welcome{}, ErrClosed
	}
	c.handshaking = nc
	c.mu.Unlock()

	cn := newClientConn(nc, c.log, c.comp, c.cfg.CallTimeout)
	cn.onBroken = c.cfg.OnBroken
	w, err := cn.handshake(&c.cfg, version)

	c.mu.Lock()
	c.handshaking = nil
	if c.closed {
		err = ErrClosed // Close may have aborted the handshake
	}
	c.mu.Unlock()
	if err != nil {
		nc.Close()
		return nil, w, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	c.wg.Add(2)
	go cn.readLoop(&c.wg)
	go cn.writeLoop(&c.wg)
	return cn, w, nil
}

// redial is the goroutine that replaces a broken connection.
func (c *Client) redial(d *dialing) {
	defer c.wg.Done()
	cn, err := c.connect()
	c.mu.Lock()
	if err == nil && c.closed {
		// Close came after the handshake; it did not see cn.
		cn.fail(ErrClosed)
		cn, err = nil, ErrClosed
	}
	if err == nil {
		c.cur.Store(cn)
		if m := c.metrics; m != nil {
			m.reconnects.Inc() // before the callers waiting on it go on
		}
	}
	c.dialing = nil
	d.cn, d.err = cn, err
	c.mu.Unlock()
	close(d.done)
	if err != nil {
		c.log.Debug("redial failed", "err", err)
	} else {
		c.log.Debug("reconnected")
	}
}

// conn returns a working connection, waiting, until deadline, for a redial
// if the current one has broken. retry reports whether a failure may pass.
func (c *Client) conn(ctx context.Context, w *waiter, deadline time.Time) (cn *clientConn, retry bool, err error) {
	if cn := c.cur.Load(); cn != nil && !cn.broken.Load() {
		return cn, false, nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false, ErrClosed
	}
	if cn := c.cur.Load(); cn != nil && !cn.broken.Load() {
		c.mu.Unlock()
		return cn, false, nil
	}
	d := c.redialLocked()
	c.mu.Unlock()

	w.timer.Reset(time.Until(deadline))
	select {
	case <-d.done:
		w.timer.Stop()
	case <-w.timer.C:
		return nil, false, ErrTimeout
	case <-ctx.Done():
		w.timer.Stop()
		return nil, false, ctxErr(ctx)
	}
	if d.err != nil {
		var se *StatusError
		return nil, !errors.Is(d.err, ErrClosed) && !errors.As(d.err, &se), d.err
	}
	return d.cn, false, nil
}

// redialLocked returns the redial in progress, starting one if there is
// none. Called with mu held, on a client that is not closed.
func (c *Client) redialLocked() *dialing {
	d := c.dialing
	if d == nil {
		d = &dialing{done: make(chan struct{})}
		c.dialing = d
		c.wg.Add(1)
		go c.redial(d)
	}
	return d
}

// errMoved breaks a connection to a replica that is not its group's
// leader, so that the calls on it are sent again to the leader.
var errMoved = errors.New("rpc: moving to the group's leader")

// follow moves the client towards its group's leader after a NOT_LEADER
// reply on cn that named leader (empty while the replica knows none): to
// leader's address, learned as a new server if the client did not have it
// (at most maxServers), or, without one, to the next server. It then
// breaks cn, whose calls are sent again on the new connection. A reply on
// a connection that is no longer the current one changes nothing (another
// call already moved), and so does an unnamed leader with only one server
// to try: that replica is waited for.
func (c *Client) follow(cn *clientConn, leader string) {
	if cn == nil {
		return
	}
	c.mu.Lock()
	if c.closed || c.cur.Load() != cn {
		c.mu.Unlock()
		return
	}
	at := int(c.at.Load()) % len(c.addrs)
	k := slices.Index(c.addrs, leader)
	if k < 0 && leader != "" && len(c.addrs) < maxServers {
		if _, _, err := net.SplitHostPort(leader); err == nil {
			c.addrs = append(c.addrs, leader)
			k = len(c.addrs) - 1
		}
	}
	if k < 0 {
		k = (at + 1) % len(c.addrs)
	}
	if k == at {
		c.mu.Unlock()
		return
	}
	c.at.Store(int64(k))
	to := c.addrs[k]
	c.mu.Unlock()
	c.log.Debug("following the group's leader", "leader", leader, "dialing", to)
	cn.fail(errMoved)
}
