package rpc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// timeoutReader returns its parts one Read at a time, failing every other
// Read with a timeout, as a connection with a read deadline does when the
// rest of a frame is late.
type timeoutReader struct {
	parts   [][]byte
	timeout bool // the next Read times out
}

func (r *timeoutReader) Read(p []byte) (int, error) {
	if r.timeout {
		r.timeout = false
		return 0, os.ErrDeadlineExceeded
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	if r.parts[0] = r.parts[0][n:]; len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
		r.timeout = true
	}
	return n, nil
}

// A frame cut by a timeout, anywhere, is read whole by the next call to
// next, whether it fits the read buffer or not.
func TestFrameReaderResumesAfterTimeout(t *testing.T) {
	for _, size := range []int{100, readBufSize - lenSize - headerSize, readBufSize, 3 * readBufSize} {
		payload := incompressible(size)
		stream := appendReply(nil, 1, 1, 0, 0, payload)
		stream = appendReply(stream, 2, 1, 0, 0, []byte("after"))
		for _, cut := range []int{1, lenSize, lenSize + 1, lenSize + headerSize, len(stream) / 2, len(stream) - 20} {
			r := &timeoutReader{parts: [][]byte{stream[:cut], stream[cut : cut+(len(stream)-cut)/2], stream[cut+(len(stream)-cut)/2:]}}
			fr := newFrameReader(r, DefaultMaxFrame)
			var got [][]byte
			for timeouts := 0; len(got) < 2; {
				body, _, err := fr.next()
				if err != nil {
					if !os.IsTimeout(err) || timeouts > 10 {
						t.Fatalf("size %d, cut %d: %v after %d timeouts", size, cut, err, timeouts)
					}
					timeouts++
					continue
				}
				f, err := decodeFrame(body)
				if err != nil {
					t.Fatalf("size %d, cut %d: %v", size, cut, err)
				}
				got = append(got, bytes.Clone(f.payload))
			}
			if !bytes.Equal(got[0], payload) || string(got[1]) != "after" {
				t.Fatalf("size %d, cut %d: frames of %d and %d bytes, want %d and 5", size, cut, len(got[0]), len(got[1]), size)
			}
		}
	}
}

// pausingListener's connections write each frame longer than min in two
// parts, pausing between them for longer than a caller reads for its own
// reply.
type pausingListener struct {
	net.Listener
	min int
}

func (l pausingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return pausingConn{Conn: nc, min: l.min}, nil
}

type pausingConn struct {
	net.Conn
	min int
}

func (c pausingConn) Write(p []byte) (int, error) {
	if len(p) <= c.min {
		return c.Conn.Write(p)
	}
	n, err := c.Conn.Write(p[:len(p)/2])
	if err != nil {
		return n, err
	}
	time.Sleep(5 * directRead)
	m, err := c.Conn.Write(p[len(p)/2:])
	return n + m, err
}

// A reply slower than the caller's own reading, cut mid-frame, comes
// through whole: the reader goroutine takes the reading over where the
// caller left it, over TCP and over TLS, for frames that fit the read
// buffer and frames that do not.
func TestSlowReplyCutMidFrame(t *testing.T) {
	serverTLS, clientTLS := testTLS(t)
	for _, tc := range []struct {
		name       string
		stls, ctls bool
	}{{"tcp", false, false}, {"tls", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			scfg, ccfg := ServerConfig{CompressAbove: -1}, ClientConfig{CompressAbove: -1}
			if tc.stls {
				scfg.TLS, ccfg.TLS = serverTLS, clientTLS
			}
			// The handshake's frames are short enough to go in one piece.
			srv := serveOn(t, pausingListener{Listener: ln, min: 512}, echo, scfg)
			cl := dial(t, srv.addr, ccfg)
			for _, size := range []int{1000, 4 * readBufSize} {
				req := incompressible(size)
				if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, req); err != nil || !bytes.Equal(reply, req) {
					t.Fatalf("%d bytes: %d bytes back, %v", size, len(reply), err)
				}
				// And the next call, made alone again, is read by its
				// caller from where the reader goroutine left off.
				if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte("short")); err != nil || string(reply) != "short" {
					t.Fatalf("call after a slow one: %q, %v", reply, err)
				}
			}
			if n := srv.ln.accepted(); n != 1 {
				t.Fatalf("server accepted %d connections, want 1", n)
			}
		})
	}
}

// Replies a handler makes on the reader goroutine while it works through
// calls leave together, in one write, once the reader has no call left to
// read.
func TestInlineRepliesShareAWrite(t *testing.T) {
	checkGoroutines(t)
	const calls = 8
	reg := prometheus.NewRegistry()
	var held []*Call
	srv := startServer(t, HandlerFunc(func(c *Call) {
		// Hold every call until the last one, then answer them all.
		held = append(held, c)
		if len(held) < calls {
			return
		}
		for _, h := range held {
			h.Reply(StatusOK, h.Payload)
		}
		held = nil
	}), ServerConfig{Metrics: reg})
	cl := dial(t, srv.addr, ClientConfig{})
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			want := fmt.Sprint("call ", i)
			if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte(want)); err != nil || string(reply) != want {
				errs <- fmt.Errorf("got %q, %v; want %q", reply, err, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The write is counted once made, perhaps after the replies arrived.
	waitFor(t, "the write to be counted", func() bool {
		return findMetric(t, reg, "canopy_rpc_frames_per_write").GetHistogram().GetSampleCount() > 0
	})
	h := findMetric(t, reg, "canopy_rpc_frames_per_write").GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() != calls {
		t.Fatalf("%d writes carried %v frames, want 1 write of %d", h.GetSampleCount(), h.GetSampleSum(), calls)
	}
}

// Replies made on other goroutines reach their callers whether they come
// one at a time, to the only call in flight, or many at once from one
// goroutine.
func TestRepliesFromOtherGoroutines(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	srv := startServer(t, h, ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{})
	call := func(i int, errs chan<- error) {
		want := fmt.Sprint("call ", i)
		if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte(want)); err != nil || string(reply) != want {
			errs <- fmt.Errorf("got %q, %v; want %q", reply, err, want)
			return
		}
		errs <- nil
	}

	// One at a time.
	for i := range 3 {
		errs := make(chan error, 1)
		go call(i, errs)
		c := recv(t, h.calls)
		c.Reply(StatusOK, c.Payload)
		if err := recv(t, errs); err != nil {
			t.Fatal(err)
		}
	}

	// Many at once, answered by one goroutine in a burst.
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		go call(i, errs)
	}
	var got []*Call
	for range n {
		got = append(got, recv(t, h.calls))
	}
	for _, c := range got {
		c.Reply(StatusOK, c.Payload)
	}
	for range n {
		if err := recv(t, errs); err != nil {
			t.Error(err)
		}
	}
}

// A connection lost while the client is not using it is noticed without a
// call: the reader goroutine watches a connection left unread.
func TestIdleLossNoticed(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, echo, ServerConfig{})
	reg := prometheus.NewRegistry()
	cl := dial(t, srv.addr, ClientConfig{Metrics: reg})
	for range 3 {
		if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	cn := cl.cur.Load()
	srv.ln.killAll()
	waitFor(t, "the client to notice", func() bool { return cn.broken.Load() })
	if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte("again")); err != nil || string(reply) != "again" {
		t.Fatalf("call after the loss: %q, %v", reply, err)
	}
	if got := metricValue(t, reg, "canopy_rpc_client_retries_total"); got != 0 {
		t.Fatalf("%v retries; the call should have gone straight to a new connection", got)
	}
}

// A caller reading for its own reply delivers the replies of others it
// meets, and a caller whose context ends while it reads still gets its
// error.
func TestCallerReadsForOthers(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	srv := startServer(t, h, ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{})

	// The first call, alone, is read by its caller; the second arrives
	// while it reads, and its reply comes first.
	first := make(chan error, 1)
	go func() {
		_, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte("first"))
		if err == nil && string(reply) != "first" {
			err = fmt.Errorf("first call got %q", reply)
		}
		first <- err
	}()
	c1 := recv(t, h.calls)
	second := make(chan error, 1)
	go func() {
		_, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte("second"))
		if err == nil && string(reply) != "second" {
			err = fmt.Errorf("second call got %q", reply)
		}
		second <- err
	}()
	c2 := recv(t, h.calls)
	c2.Reply(StatusOK, c2.Payload)
	if err := recv(t, second); err != nil {
		t.Fatal(err)
	}
	c1.Reply(StatusOK, c1.Payload)
	if err := recv(t, first); err != nil {
		t.Fatal(err)
	}

	// Cancelled while its caller reads.
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, _, err := cl.Call(ctx, 1, Cred{}, nil)
		done <- err
	}()
	c := recv(t, h.calls)
	cancel()
	if err := recv(t, done); err == nil || ctx.Err() == nil {
		t.Fatalf("cancelled call: %v", err)
	}
	c.Reply(StatusOK, nil)
	// The connection still works.
	go func() {
		_, _, err := cl.Call(testCtx(t), 1, Cred{}, nil)
		done <- err
	}()
	recv(t, h.calls).Reply(StatusOK, nil)
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
}
