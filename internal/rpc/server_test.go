package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawConn opens a plain TCP connection to addr, closed when the test ends.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(bound))
	return nc
}

// rawHandshake sends a hello and returns the welcome.
func rawHandshake(t *testing.T, nc net.Conn, h hello) welcome {
	t.Helper()
	if _, err := nc.Write(appendHello(nil, &h)); err != nil {
		t.Fatal(err)
	}
	fr := newFrameReader(nc, maxWelcomeFrame)
	body, _, err := fr.next()
	if err != nil {
		t.Fatalf("read welcome: %v", err)
	}
	w, err := decodeWelcome(body)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// expectClosed reads from nc until the server closes it. A read that times
// out means the server kept the connection open.
func expectClosed(t *testing.T, nc net.Conn) {
	t.Helper()
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("server did not close the connection: %v", err)
	}
}

func TestWrongSecretRefused(t *testing.T) {
	checkGoroutines(t)
	var served atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) { served.Add(1); c.Reply(0, nil) }),
		ServerConfig{Secret: "right"})

	for _, secret := range []string{"wrong", ""} {
		_, err := Dial(srv.addr, ClientConfig{Secret: secret, Logger: quietLogger()})
		if !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("Dial with secret %q: %v, want ErrUnauthenticated", secret, err)
		}
	}

	// By hand: the welcome refuses, and a call sent anyway is not served.
	nc := rawConn(t, srv.addr)
	w := rawHandshake(t, nc, hello{version: protocolVersion, secret: []byte("wrong")})
	if w.status != StatusUnauthenticated || w.version != protocolVersion {
		t.Fatalf("welcome %+v, want StatusUnauthenticated", w)
	}
	nc.Write(appendCall(nil, 1, 1, 0, &Cred{}, nil)) // may fail: the server is closing
	expectClosed(t, nc)

	cl := dial(t, srv.addr, ClientConfig{Secret: "right"})
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("server served %d calls, want only the authenticated one", n)
	}
}

func TestBadVersionRefused(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, echo, ServerConfig{})
	nc := rawConn(t, srv.addr)
	// A hello of a future version may carry anything after its version.
	b := appendHeader(nil, headerSize+6+3, kindHello, 0, 0, 0, 0)
	b = append(b, helloMagic...)
	b = le.AppendUint16(b, protocolVersion+1)
	b = append(b, "new"...)
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	fr := newFrameReader(nc, 64)
	body, _, err := fr.next()
	if err != nil {
		t.Fatal(err)
	}
	w, err := decodeWelcome(body)
	if err != nil || w.status != StatusBadVersion || w.version != protocolVersion {
		t.Fatalf("welcome %+v, %v; want StatusBadVersion offering version %d", w, err, protocolVersion)
	}
	expectClosed(t, nc)
}

func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	checkGoroutines(t)
	var served atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) { served.Add(1); c.Reply(0, c.Payload) }),
		ServerConfig{MaxFrame: 4096})
	good := dial(t, srv.addr, ClientConfig{MaxFrame: 4096})

	frame := func(kind, flags uint8, rest ...byte) []byte {
		b := appendHeader(nil, headerSize+len(rest), kind, 0, 0, 0, 0)
		b[lenSize+1] = flags
		return append(b, rest...)
	}
	call := appendCall(nil, 1, 1, 0, &Cred{}, []byte("x"))
	for _, tc := range []struct {
		name      string
		handshake bool
		send      []byte
	}{
		{"http instead of hello", false, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"call instead of hello", false, call},
		{"garbage hello", false, frame(kindHello, 0, 'X', 'X', 'X', 'X', 1, 0)},
		{"random bytes", true, []byte{0x14, 0, 0, 0, 0x9c, 0x3f, 0x11, 0xe0, 0x5a, 0x01, 0x77, 0x42, 0xa8, 0x00, 0x13, 0x37, 0xfe, 0xed, 0xfa, 0xce, 0xca, 0xfe, 0xba, 0xbe}},
		{"oversize length", true, le.AppendUint32(nil, 4097)},
		{"length below header", true, le.AppendUint32(nil, headerSize-1)},
		{"bad kind", true, frame(9, 0)},
		{"reply from client", true, frame(kindReply, 0)},
		{"second hello", true, appendHello(nil, &hello{version: protocolVersion})},
		{"compressed without a codec", true, frame(kindCall, flagCompressed, make([]byte, credSize)...)},
		{"unknown flag", true, frame(kindCall, 2, make([]byte, credSize)...)},
		{"call without cred", true, frame(kindCall, 0, 1, 2, 3)},
		{"too many groups", true, frame(kindCall, 0, 0, 0, 0, 0, 0, 0, 0, 0, MaxGroups+1, 0)},
		{"groups cut short", true, frame(kindCall, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 0, 0, 0)},
		{"cut mid-frame", true, call[:len(call)-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := rawConn(t, srv.addr)
			if tc.handshake {
				if w := rawHandshake(t, nc, hello{version: protocolVersion}); w.status != StatusOK {
					t.Fatalf("welcome %+v", w)
				}
			}
			if _, err := nc.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.name == "cut mid-frame" {
				nc.(*net.TCPConn).CloseWrite()
			}
			expectClosed(t, nc)

			want := fmt.Sprintf("still here after %s", tc.name)
			if _, reply, err := good.Call(testCtx(t), 1, Cred{}, []byte(want)); err != nil || string(reply) != want {
				t.Fatalf("good client: %q, %v", reply, err)
			}
		})
	}
	if n := served.Load(); n != 15 {
		t.Fatalf("server served %d calls, want only the good client's 15", n)
	}
	waitFor(t, "bad connections to go", func() bool { return srv.numConns() == 1 })
}

func TestShutdownDrainsCalls(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	srv := startServer(t, h, ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{MaxRetries: -1})

	const n = 5
	type res struct {
		reply []byte
		err   error
	}
	results := make(chan res, n)
	for i := range n {
		go func() {
			_, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte{byte(i)})
			results <- res{reply, err}
		}()
	}
	held := make([]*Call, n)
	for i := range held {
		held[i] = recv(t, h.calls)
	}

	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Shutdown(testCtx(t)) }()
	waitFor(t, "shutdown to begin", srv.shuttingDown.Load)
	if err := recv(t, srv.serveCh); err != nil {
		t.Fatalf("Serve returned %v, want nil", err)
	}
	srv.serveCh <- nil // for the cleanup

	// A new call on the busy connection is turned away, retriably.
	_, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != StatusShuttingDown {
		t.Fatalf("call during shutdown: %v, want StatusShuttingDown", err)
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v with %d calls in flight", err, n)
	default:
	}

	for _, c := range held {
		c.Reply(StatusOK, append([]byte("done "), c.Payload...))
	}
	if err := recv(t, shutdown); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for range n {
		r := recv(t, results)
		if r.err != nil || len(r.reply) != 6 || string(r.reply[:5]) != "done " {
			t.Fatalf("drained call got %q, %v", r.reply, r.err)
		}
	}
	if c := srv.numConns(); c != 0 {
		t.Fatalf("%d connections left after Shutdown", c)
	}
}

func TestShutdownGivesUp(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	srv := startServer(t, h, ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{MaxRetries: -1})
	done := make(chan error, 1)
	go func() {
		_, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
		done <- err
	}()
	c := recv(t, h.calls)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	if err := recv(t, done); err == nil {
		t.Fatal("call succeeded although its server was closed")
	}
	c.Reply(StatusOK, []byte("too late")) // its connection is gone: nothing happens
}

func TestIdleConnectionClosed(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, echo, ServerConfig{IdleTimeout: 20 * time.Millisecond})
	cl := dial(t, srv.addr, ClientConfig{})
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "idle connection to close", func() bool { return srv.numConns() == 0 })
	if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte("again")); err != nil || string(reply) != "again" {
		t.Fatalf("call after idle close: %q, %v", reply, err)
	}
	if n := srv.ln.accepted(); n != 2 {
		t.Fatalf("server accepted %d connections, want 2", n)
	}
}

func TestBusyConnectionNotIdle(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	srv := startServer(t, h, ServerConfig{IdleTimeout: time.Millisecond})
	cl := dial(t, srv.addr, ClientConfig{})
	done := make(chan error, 1)
	go func() {
		_, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
		done <- err
	}()
	// The connection may well idle out before the call arrives; the client
	// then redials. Count from the connection that carries the call.
	c := recv(t, h.calls)
	accepted := srv.ln.accepted()

	// Let many idle periods pass with the call in flight; the connection
	// must survive them to carry the reply.
	time.Sleep(20 * time.Millisecond)
	c.Reply(StatusOK, nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case again := <-h.calls:
		again.Reply(StatusOK, nil)
		t.Fatal("the call was resent: its connection was closed while it was in flight")
	case <-time.After(bound):
		t.Fatal("no reply")
	}
	if n := srv.ln.accepted(); n != accepted {
		t.Fatalf("server accepted %d connections, then %d", accepted, n)
	}
}

func TestMaxInflight(t *testing.T) {
	checkGoroutines(t)
	const limit, calls = 2, 8
	var (
		mu   sync.Mutex
		held []*Call
		most int // the most calls held at once
	)
	srv := startServer(t, HandlerFunc(func(c *Call) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, c)
		most = max(most, len(held))
	}), ServerConfig{MaxInflight: limit})
	cl := dial(t, srv.addr, ClientConfig{})
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
			errs <- err
		}()
	}
	// Answer one call at a time, each time the server holds as many as
	// it may; the reader must never hand over more.
	for replied := range calls {
		want := min(limit, calls-replied)
		waitFor(t, fmt.Sprintf("%d calls to be held", want), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(held) >= want
		})
		mu.Lock()
		c := held[0]
		held = held[1:]
		mu.Unlock()
		c.Reply(StatusOK, nil)
	}
	for range calls {
		if err := recv(t, errs); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != limit {
		t.Fatalf("handler held up to %d calls at once, want %d", most, limit)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	srv := startServer(t, h, ServerConfig{})
	clients := make([]*Client, 4)
	errs := make(chan error, len(clients))
	for i := range clients {
		clients[i] = dial(t, srv.addr, ClientConfig{MaxRetries: -1})
		go func() {
			_, _, err := clients[i].Call(testCtx(t), 1, Cred{}, nil)
			errs <- err
		}()
	}
	var held []*Call
	for range clients {
		held = append(held, recv(t, h.calls))
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	for range clients {
		if err := recv(t, errs); err == nil {
			t.Fatal("call succeeded on a closed server")
		}
	}
	for _, c := range held {
		c.Reply(StatusOK, nil)
	}
	if n := srv.numConns(); n != 0 {
		t.Fatalf("%d connections left after Close", n)
	}
}
