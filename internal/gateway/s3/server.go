package s3

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/metrics"
	"github.com/versity/versitygw/s3api"
	"github.com/versity/versitygw/s3api/middlewares"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/gateway"
)

// Region is the region the gateway reports and signs for.
const Region = "us-east-1"

// Config configures an S3 gateway.
type Config struct {
	Client *client.Client
	Root   string   // the directory whose subdirectories are the buckets; "" = the namespace's root
	Keys   *Keyring // the access keys admitted; at least one
	// Anonymous is the identity of requests that carry no credentials;
	// nil refuses them (anonymous.go).
	Anonymous *client.Cred
	// Dial connects to the service with a key's token (keycreds.go); needed
	// if a key has one. Start dials each token once; Close closes them.
	Dial    DialFunc
	Listen  string // address to serve on; port 0 picks a free one
	TLS     *tls.Config
	Metrics *gateway.Metrics // nil = none
	Logger  *slog.Logger     // nil = discard

	// UploadGrace is how long a multipart upload may go without a part
	// before the gateway removes it; 0 = DefaultUploadGrace, < 0 = never.
	UploadGrace time.Duration
}

// DefaultUploadGrace is how long an idle multipart upload is kept.
const DefaultUploadGrace = 24 * time.Hour

// Server is a running S3 gateway.
type Server struct {
	api   *s3api.S3ApiServer
	addr  net.Addr
	tlsLn net.Listener  // the TLS front, if any
	done  chan error    // the API server's end
	stop  chan struct{} // closed by Close: ends the sweeper
	keys  *Keyring      // whose keys' connections Close closes
	wg    sync.WaitGroup
}

// ErrNoKeys is returned by Start for a keyring without keys.
var ErrNoKeys = errors.New("no access keys")

// Start serves the gateway cfg describes until Close.
//
// versitygw listens for itself, on an address rather than a listener: a
// port 0 is resolved first, and with TLS the API listens on a loopback
// port behind a TLS front on cfg.Listen that passes the connections
// through (versitygw's own TLS setting takes a type of an internal
// package).
func Start(cfg Config) (*Server, error) {
	if cfg.Keys == nil || len(cfg.Keys.keys) == 0 {
		return nil, ErrNoKeys
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The root account of versitygw: a key no one is given.
	var raw [32]byte
	rand.Read(raw[:])
	root := middlewares.RootUserConfig{Access: "canopy-root-" + hex.EncodeToString(raw[:8]), Secret: hex.EncodeToString(raw[8:])}

	s := &Server{done: make(chan error, 1), stop: make(chan struct{})}
	apiAddr := cfg.Listen
	if cfg.TLS != nil {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
		s.tlsLn, s.addr = tls.NewListener(ln, cfg.TLS), ln.Addr()
		apiAddr = "127.0.0.1:0"
	}
	apiAddr, err := resolvePort(apiAddr)
	if err != nil {
		s.closeFront()
		return nil, err
	}
	if s.addr == nil {
		if s.addr, err = net.ResolveTCPAddr("tcp", apiAddr); err != nil {
			return nil, err
		}
	}
	mm := &metricsManager{m: cfg.Metrics}
	listening := make(chan struct{})
	opts := []s3api.Option{s3api.WithQuiet(), s3api.WithKeepAlive(), s3api.WithDisableACL(),
		s3api.WithConcurrencyLimiter(maxConnections, maxRequests), s3api.WithMiddleware("/", fixTrailers),
		s3api.WithMiddleware("/", fixPolicyWording),
		s3api.WithOnListen(func() { close(listening) })}
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = cfg.Keys.dialKeys(dctx, cfg.Dial)
	cancel()
	if err != nil {
		s.closeFront()
		return nil, fmt.Errorf("s3 gateway: %w", err)
	}
	s.keys = cfg.Keys
	be := NewBackend(cfg.Client, cfg.Root, cfg.Keys)
	be.anon = cfg.Anonymous
	api, err := s3api.New(be, root, Region, iam{cfg.Keys}, nil, nil, nil, mm, opts...)
	if err != nil {
		s.closeFront()
		cfg.Keys.closeKeys(nil)
		return nil, fmt.Errorf("s3 gateway: %w", err)
	}
	if !streamForms(api) {
		log.Warn("s3 gateway: multipart form bodies (POST Object) are read whole by fasthttp before versitygw parses them")
	}
	s.api = api
	go func() { s.done <- api.ServeMultiPort([]string{apiAddr}) }()
	select {
	case <-listening:
	case err := <-s.done:
		s.closeFront()
		cfg.Keys.closeKeys(nil)
		return nil, fmt.Errorf("s3 gateway on %s: %w", apiAddr, err)
	case <-time.After(30 * time.Second):
		s.Close()
		return nil, fmt.Errorf("s3 gateway on %s: not listening after 30s", apiAddr)
	}
	if s.tlsLn != nil {
		s.wg.Add(1)
		go s.front(apiAddr, log)
	}
	grace := cfg.UploadGrace
	if grace == 0 {
		grace = DefaultUploadGrace
	}
	if grace > 0 {
		s.wg.Add(1)
		go s.sweep(be, grace, log)
	}
	return s, nil
}

// sweep removes idle multipart uploads, every quarter of grace (at most
// hourly), until Close. Several gateways sweeping the same namespace do
// no harm: a removal that finds nothing is no error.
func (s *Server) sweep(be *Backend, grace time.Duration, log *slog.Logger) {
	defer s.wg.Done()
	t := time.NewTicker(min(grace/4, time.Hour))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			n, err := be.SweepUploads(ctx, now.Add(-grace))
			cancel()
			if err != nil {
				log.Warn("s3 gateway: sweep idle uploads", "err", err)
			} else if n > 0 {
				log.Info("s3 gateway: removed idle uploads", "count", n)
			}
		}
	}
}

// resolvePort picks a free port for an address whose port is 0. Another
// process could take it before versitygw does; Start then fails.
func resolvePort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("listen address %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen %s: %w", addr, err)
	}
	defer ln.Close()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return net.JoinHostPort(host, port), nil
}

// front accepts TLS connections and passes each through to the API.
func (s *Server) front(apiAddr string, log *slog.Logger) {
	defer s.wg.Done()
	for {
		conn, err := s.tlsLn.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conn.Close()
			up, err := net.Dial("tcp", apiAddr)
			if err != nil {
				log.Warn("s3 gateway: reach the API", "err", err)
				return
			}
			defer up.Close()
			go func() {
				io.Copy(up, conn)
				up.(*net.TCPConn).CloseWrite()
			}()
			io.Copy(conn, up)
		}()
	}
}

func (s *Server) closeFront() {
	if s.tlsLn != nil {
		s.tlsLn.Close()
	}
}

// Addr is the address the gateway serves on.
func (s *Server) Addr() net.Addr { return s.addr }

// Done reports the end of the API server, with its error.
func (s *Server) Done() <-chan error { return s.done }

// Close stops the gateway, waiting up to ten seconds for requests in
// flight.
func (s *Server) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.closeFront()
	var err error
	if s.api != nil {
		err = s.api.ShutDown()
	}
	s.wg.Wait()
	if s.keys != nil {
		s.keys.closeKeys(nil)
		s.keys = nil
	}
	return err
}

// metricsManager sees versitygw's report of every request before its
// response is written: it feeds the gateway's metrics (m; nil: none) and
// closes the connection after a refused request that came with a body.
// Send is called on the request's goroutine.
type metricsManager struct{ m *gateway.Metrics }

func (mm *metricsManager) Send(ctx fiber.Ctx, err error, action string, count int64, status int) {
	var apiErr s3err.APIError
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case err != nil:
		status = http.StatusInternalServerError
	case status == 0:
		status = http.StatusOK
	}
	// Request bodies are streamed, so a request whose body was not read to
	// its end leaves the rest on the connection, where it would be read as
	// the next request (and answered 400). A refused request's connection
	// is closed; an accepted one's leftover (the final chunk of an empty
	// aws-chunked body, which versitygw does not read) is read and dropped
	// if it is short, and the connection closed if it is not.
	if ctx.Request().Header.ContentLength() != 0 {
		if status >= http.StatusBadRequest || !drainBody(ctx.Request().BodyStream()) {
			ctx.Response().SetConnectionClose()
		}
	}
	if mm.m == nil {
		return
	}
	var elapsed time.Duration
	if start, ok := utils.ContextKeyStartTime.Get(ctx).(time.Time); ok {
		elapsed = time.Since(start)
	}
	var in, out int64
	if err == nil {
		switch action {
		case metrics.ActionPutObject, metrics.ActionUploadPart:
			in = count
		case metrics.ActionGetObject:
			out = count
		}
	}
	action = strings.TrimPrefix(action, "s3_")
	mm.m.Observe(action, status, in, out, elapsed)
}

func (mm *metricsManager) Close() {}

// maxDrain bounds what drainBody reads of a request body its handler left.
const maxDrain = 64 << 10

// drainBody reads what is left of a request body, up to maxDrain bytes,
// and reports whether it reached the end. A nil body (read whole before
// the handler ran) is at its end.
func drainBody(body io.Reader) bool {
	if body == nil {
		return true
	}
	n, err := io.CopyN(io.Discard, body, maxDrain+1)
	return err == io.EOF && n <= maxDrain
}

// Bounds on what a gateway serves at once (versitygw's defaults).
const (
	maxConnections = 250000
	maxRequests    = 100000
)
