package rpc

import (
	"context"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// bound is how long any single wait in a test may take before the test
// fails; it keeps every test finite without asserting on timing.
const bound = 10 * time.Second

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// checkGoroutines fails the test if, after every other cleanup has run, the
// number of goroutines does not come back to what it was on entry. Call it
// first so that its cleanup runs last.
func checkGoroutines(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= base })
	})
}

// waitFor polls cond until it holds, failing the test after bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("gave up waiting for %s; goroutines:\n%s", what, buf)
		}
		time.Sleep(time.Millisecond)
	}
}

// recv receives from ch, failing the test after bound.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(bound):
		t.Fatalf("nothing received in %v", bound)
		panic("unreachable")
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return ctx
}

// trackingListener remembers the connections it accepted, so a test can
// kill them from the server side.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, nc)
		l.mu.Unlock()
	}
	return nc, err
}

func (l *trackingListener) killAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, nc := range l.conns {
		nc.Close()
	}
}

func (l *trackingListener) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

type testServer struct {
	*Server
	ln      *trackingListener
	addr    string
	serveCh chan error // Serve's result
}

// startServer serves h on 127.0.0.1 until the test ends.
func startServer(t *testing.T, h Handler, cfg ServerConfig) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, ln, h, cfg)
}

// serveOn serves h on ln until the test ends.
func serveOn(t *testing.T, ln net.Listener, h Handler, cfg ServerConfig) *testServer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	ts := &testServer{
		Server:  NewServer(h, cfg),
		ln:      &trackingListener{Listener: ln},
		addr:    ln.Addr().String(),
		serveCh: make(chan error, 1),
	}
	go func() { ts.serveCh <- ts.Serve(ts.ln) }()
	t.Cleanup(func() {
		if err := ts.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
		if err := recv(t, ts.serveCh); err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ts
}

func (ts *testServer) numConns() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.conns)
}

// dial connects a client that is closed when the test ends.
func dial(t *testing.T, addr string, cfg ClientConfig) *Client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	c, err := Dial(addr, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// holder is a handler that keeps every call until the test replies to it.
type holder struct {
	calls chan *Call
}

func newHolder() *holder { return &holder{calls: make(chan *Call, 1024)} }

func (h *holder) Serve(c *Call) { h.calls <- c }

// echo replies with the call's own payload.
var echo = HandlerFunc(func(c *Call) { c.Reply(StatusOK, c.Payload) })

type attempt struct {
	client ClientID
	id     uint64
}

// attemptLog records which calls a handler was given.
type attemptLog struct {
	mu   sync.Mutex
	seen []attempt
}

// add records c and returns how many calls have been recorded.
func (l *attemptLog) add(c *Call) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, attempt{c.Client, c.ID})
	return len(l.seen)
}

func (l *attemptLog) get() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

func (l *attemptLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = nil
}
