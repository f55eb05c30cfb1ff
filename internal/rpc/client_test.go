package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	checkGoroutines(t)
	type seen struct {
		client  ClientID
		method  uint16
		cred    Cred
		payload string
	}
	got := make(chan seen, 1)
	srv := startServer(t, HandlerFunc(func(c *Call) {
		got <- seen{c.Client, c.Method, c.Cred, string(c.Payload)}
		switch c.Method {
		case 1:
			c.Reply(StatusOK, append([]byte("re: "), c.Payload...))
		default:
			c.Reply(2, nil) // an application status, ENOENT say
		}
	}), ServerConfig{})
	id := ClientID{1, 2, 3}
	cl := dial(t, srv.addr, ClientConfig{ClientID: id})
	if cl.ID() != id {
		t.Fatalf("ID() = %v, want %v", cl.ID(), id)
	}
	cred := Cred{UID: 1000, GID: 100, Groups: []uint32{4, 24, 27}}

	status, reply, err := cl.Call(testCtx(t), 1, cred, []byte("ping"))
	if err != nil || status != StatusOK || string(reply) != "re: ping" {
		t.Fatalf("Call = %d, %q, %v; want 0, \"re: ping\", nil", status, reply, err)
	}
	s := recv(t, got)
	if s.client != id || s.method != 1 || s.payload != "ping" ||
		s.cred.UID != 1000 || s.cred.GID != 100 || !slices.Equal(s.cred.Groups, cred.Groups) {
		t.Fatalf("server saw %+v", s)
	}

	status, reply, err = cl.Call(testCtx(t), 9, Cred{}, nil)
	if err != nil || status != 2 || len(reply) != 0 {
		t.Fatalf("Call = %d, %q, %v; want application status 2 with no error", status, reply, err)
	}
	if s := recv(t, got); s.method != 9 || s.cred.Groups != nil || s.payload != "" {
		t.Fatalf("server saw %+v", s)
	}
}

func TestLargePayload(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, echo, ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{})
	req := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB, beyond the read buffer
	status, reply, err := cl.Call(testCtx(t), 1, Cred{}, req)
	if err != nil || status != StatusOK || !bytes.Equal(reply, req) {
		t.Fatalf("Call = %d, %d bytes, %v; want the 1 MiB request echoed", status, len(reply), err)
	}
}

func TestRequestTooLarge(t *testing.T) {
	checkGoroutines(t)
	var calls atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) { calls.Add(1); c.Reply(0, nil) }), ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{MaxFrame: 4096})
	_, _, err := cl.Call(testCtx(t), 1, Cred{}, make([]byte, 4096))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	_, _, err = cl.Call(testCtx(t), 1, Cred{Groups: make([]uint32, MaxGroups+1)}, nil)
	if err == nil {
		t.Fatal("call with too many groups succeeded")
	}
	// Neither was sent: the next call is the first the server sees.
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("server served %d calls, want 1", n)
	}
}

func TestConcurrentCallers(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, echo, ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{})
	const callers, calls = 16, 200
	errs := make(chan error, callers)
	for g := range callers {
		go func() {
			for i := range calls {
				want := fmt.Sprintf("caller %d call %d", g, i)
				_, reply, err := cl.Call(testCtx(t), uint16(g), Cred{UID: uint32(g)}, []byte(want))
				if err == nil && string(reply) != want {
					err = fmt.Errorf("got reply %q, want %q", reply, want)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range callers {
		if err := recv(t, errs); err != nil {
			t.Error(err)
		}
	}
}

func TestOutOfOrderReplies(t *testing.T) {
	checkGoroutines(t)
	const n = 32
	var (
		mu      sync.Mutex
		held    []*Call
		order   []uint64 // call ids in the order they were replied to
		replier sync.WaitGroup
	)
	srv := startServer(t, HandlerFunc(func(c *Call) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, c)
		if len(held) < n {
			return
		}
		// All are in: answer them from another goroutine, last first.
		calls := slices.Clone(held)
		replier.Go(func() {
			for _, c := range slices.Backward(calls) {
				mu.Lock()
				order = append(order, c.ID)
				mu.Unlock()
				c.Reply(StatusOK, append([]byte("reply to "), c.Payload...))
			}
		})
	}), ServerConfig{})
	t.Cleanup(replier.Wait)
	cl := dial(t, srv.addr, ClientConfig{})

	errs := make(chan error, n)
	for i := range n {
		go func() {
			req := fmt.Sprintf("call %d", i)
			_, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte(req))
			if err == nil && string(reply) != "reply to "+req {
				err = fmt.Errorf("call %q got reply %q", req, reply)
			}
			errs <- err
		}()
	}
	for range n {
		if err := recv(t, errs); err != nil {
			t.Error(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if order[i] != held[n-1-i].ID {
			t.Fatalf("replies were not sent in reverse arrival order: %v", order)
		}
	}
}

func TestBusyIsRetried(t *testing.T) {
	checkGoroutines(t)
	var attempts attemptLog
	srv := startServer(t, HandlerFunc(func(c *Call) {
		if attempts.add(c) <= 3 {
			c.Reply(StatusBusy, nil)
			return
		}
		c.Reply(StatusOK, []byte("done"))
	}), ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{MaxRetries: 5})
	status, reply, err := cl.Call(testCtx(t), 1, Cred{}, nil)
	if err != nil || status != StatusOK || string(reply) != "done" {
		t.Fatalf("Call = %d, %q, %v; want success after retries", status, reply, err)
	}
	seen := attempts.get()
	if len(seen) != 4 {
		t.Fatalf("server saw %d attempts, want 4", len(seen))
	}
	for _, a := range seen {
		if a != seen[0] || a.client != cl.ID() {
			t.Fatalf("attempts differ in client or call id: %v", seen)
		}
	}
}

func TestBusyForever(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        ClientConfig
		wantTries  int // 0: not checked
		outOfRetry bool
	}{
		{"out of retries", ClientConfig{MaxRetries: 3}, 4, true},
		{"out of time", ClientConfig{MaxRetries: 1 << 20, OpTimeout: 50e6}, 0, false},
		{"no retries", ClientConfig{MaxRetries: -1}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			var tries atomic.Int32
			srv := startServer(t, HandlerFunc(func(c *Call) { tries.Add(1); c.Reply(StatusBusy, nil) }), ServerConfig{})
			cl := dial(t, srv.addr, tc.cfg)
			status, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
			if !errors.Is(err, ErrBusy) || status != StatusBusy {
				t.Fatalf("Call = %d, %v; want StatusBusy, ErrBusy", status, err)
			}
			var se *StatusError
			if !errors.As(err, &se) || se.Status != StatusBusy {
				t.Fatalf("err = %v, want a *StatusError for StatusBusy", err)
			}
			// Out of retries, the call ends with the busy status alone; out
			// of time, it may also be a timeout, if the deadline cut the
			// last attempt.
			if tc.outOfRetry && errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, a timeout, want the last busy status", err)
			}
			n := int(tries.Load())
			if tc.wantTries != 0 && n != tc.wantTries {
				t.Fatalf("server saw %d tries, want %d", n, tc.wantTries)
			}
			if !tc.outOfRetry && n > tc.cfg.MaxRetries {
				t.Fatalf("server saw %d tries; OpTimeout should have ended the call first", n)
			}
		})
	}
}

func TestTransportStatusNotRetried(t *testing.T) {
	checkGoroutines(t)
	var tries atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) { tries.Add(1); c.Reply(StatusUnknownMethod, nil) }), ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{})
	status, _, err := cl.Call(testCtx(t), 77, Cred{}, nil)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != StatusUnknownMethod || status != StatusUnknownMethod {
		t.Fatalf("Call = %d, %v; want StatusUnknownMethod as a *StatusError", status, err)
	}
	if n := tries.Load(); n != 1 {
		t.Fatalf("server saw %d tries, want 1", n)
	}
}

func TestReconnectKeepsCallID(t *testing.T) {
	checkGoroutines(t)
	var (
		srv      *testServer
		attempts attemptLog
	)
	srv = startServer(t, HandlerFunc(func(c *Call) {
		if attempts.add(c) == 1 && c.ID == 2 {
			srv.ln.killAll()                  // the connection dies mid-call...
			c.Reply(StatusOK, []byte("lost")) // ...so this reply never arrives
			return
		}
		c.Reply(StatusOK, []byte("second"))
	}), ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{})
	// A first call, so the one that is retried does not have id 1.
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	attempts.reset()

	status, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte("x"))
	if err != nil || status != StatusOK || string(reply) != "second" {
		t.Fatalf("Call = %d, %q, %v; want the reply to the resent call", status, reply, err)
	}
	seen := attempts.get()
	if len(seen) != 2 {
		t.Fatalf("server saw %d attempts, want 2", len(seen))
	}
	if seen[0] != seen[1] || seen[0].client != cl.ID() || seen[0].id != 2 {
		t.Fatalf("attempts %+v: want both from client %v with call id 2", seen, cl.ID())
	}
	if n := srv.ln.accepted(); n != 2 {
		t.Fatalf("server accepted %d connections, want 2", n)
	}
}

func TestCallTimeout(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	srv := startServer(t, h, ServerConfig{})

	t.Run("retried until out of retries", func(t *testing.T) {
		cl := dial(t, srv.addr, ClientConfig{CallTimeout: 20e6, MaxRetries: 2})
		_, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
		first := recv(t, h.calls)
		for range 2 {
			c := recv(t, h.calls)
			if c.ID != first.ID || c.Client != first.Client {
				t.Fatalf("resent call has id %d from %v, want %d from %v", c.ID, c.Client, first.ID, first.Client)
			}
			c.Reply(0, nil)
		}
		first.Reply(0, nil) // nobody waits for it any more: dropped
	})

	t.Run("context deadline wins", func(t *testing.T) {
		cl := dial(t, srv.addr, ClientConfig{})
		ctx, cancel := context.WithTimeout(testCtx(t), 20e6)
		defer cancel()
		_, _, err := cl.Call(ctx, 1, Cred{}, nil)
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
		recv(t, h.calls).Reply(0, nil)
	})

	t.Run("context cancelled", func(t *testing.T) {
		cl := dial(t, srv.addr, ClientConfig{})
		ctx, cancel := context.WithCancel(testCtx(t))
		done := make(chan error, 1)
		go func() {
			_, _, err := cl.Call(ctx, 1, Cred{}, nil)
			done <- err
		}()
		c := recv(t, h.calls)
		cancel()
		if err := recv(t, done); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		c.Reply(0, nil)
	})
}

func TestClientClose(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	srv := startServer(t, h, ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{})
	done := make(chan error, 1)
	go func() {
		_, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
		done <- err
	}()
	c := recv(t, h.calls)
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, done); !errors.Is(err, ErrClosed) {
		t.Fatalf("call in flight ended with %v, want ErrClosed", err)
	}
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
	c.Reply(0, nil)
}

func TestDialRefused(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, echo, ServerConfig{})
	addr := srv.addr
	srv.Close()
	if _, err := Dial(addr, ClientConfig{Logger: quietLogger()}); err == nil {
		t.Fatal("Dial to a closed server succeeded")
	}
}

func TestRedialAfterConnectionLoss(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, echo, ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{OpTimeout: bound})
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, []byte("a")); err != nil {
		t.Fatal(err)
	}
	// Every connection dies; the next call redials.
	srv.ln.killAll()
	waitFor(t, "server to drop the connection", func() bool { return srv.numConns() == 0 })
	if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte("b")); err != nil || string(reply) != "b" {
		t.Fatalf("call after the connection died: %q, %v", reply, err)
	}
}

func TestTimeoutAfterBusy(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	var tries atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) {
		if tries.Add(1) == 1 {
			c.Reply(StatusBusy, nil)
			return
		}
		h.Serve(c) // the retry is never answered in time
	}), ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{OpTimeout: 50e6})
	status, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrBusy) || status != StatusBusy {
		t.Fatalf("Call = %d, %v; want StatusBusy and an error that is both ErrTimeout and ErrBusy", status, err)
	}
	recv(t, h.calls).Reply(StatusOK, nil)
}

// stallListener hands out its first connection as it is and every later
// one as a connection whose reads block until it is closed: a server that
// never answers a redial's hello.
type stallListener struct {
	net.Listener
	n atomic.Int32
}

func (l *stallListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil || l.n.Add(1) == 1 {
		return nc, err
	}
	return &stallConn{Conn: nc, closed: make(chan struct{})}, nil
}

type stallConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *stallConn) Read([]byte) (int, error) {
	<-c.closed
	return 0, net.ErrClosed
}

func (c *stallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func TestCloseAbortsHandshake(t *testing.T) {
	checkGoroutines(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveOn(t, &stallListener{Listener: ln}, echo, ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{DialTimeout: time.Hour})
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	srv.ln.killAll()
	done := make(chan error, 1)
	go func() {
		_, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
		done <- err
	}()
	waitFor(t, "the redial to reach its handshake", func() bool {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return cl.handshaking != nil
	})
	closed := make(chan error, 1)
	go func() { closed <- cl.Close() }()
	if err := recv(t, closed); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, done); !errors.Is(err, ErrClosed) {
		t.Fatalf("call during the handshake ended with %v, want ErrClosed", err)
	}
}
