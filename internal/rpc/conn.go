package rpc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one accepted connection.
//
// Its reader goroutine (readLoop) owns fr, runs the handshake and hands
// calls to the Handler or to the queues. Its writer goroutine (writeLoop)
// owns the idle timer. The socket's write side belongs to one goroutine at
// a time, as out arbitrates: the reader, writing the replies made while it
// held the output; a goroutine replying to the only call in flight; or the
// writer goroutine, which the others hand it to when replies keep coming.
// Any goroutine replying appends to out; the reader takes a slot per call
// and whoever writes the reply gives it back.
type conn struct {
	srv     *Server
	nc      net.Conn // a *tls.Conn with ServerConfig.TLS
	log     *slog.Logger
	client  ClientID // set by the handshake, before any call is read
	ident   any      // set by the handshake: what ServerConfig.Authenticate returned
	joined  bool     // counted in srv.clients; guarded by srv.mu
	codec   Codec    // set by the handshake: the connection's codec, 0 = none
	version uint16   // set by the handshake: the protocol version spoken
	fr      frameReader
	out     outbound
	batch   Batch // the reader's; see Call.Batch

	// writeBy is when, in monotime, the socket's write deadline falls.
	// Only the owner of out's write side touches it.
	writeBy int64

	// slots holds one token per call in flight; the reader blocks on it at
	// MaxInflight.
	slots chan struct{}

	// calls counts the calls in flight too, for the idle check, which needs
	// it as an atomic: see idleClose.
	calls atomic.Int64

	// idling is set while the writer is deciding to close the connection
	// for idleness.
	idling atomic.Bool

	// active is when the connection last read or wrote a frame, in
	// monotonic nanoseconds (see monotime).
	active atomic.Int64

	done      chan struct{} // closed by close
	closeOnce sync.Once
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		srv:   s,
		nc:    nc,
		log:   s.log.With("remote", nc.RemoteAddr().String()),
		fr:    newFrameReader(nc, maxHelloFrame),
		out:   newOutbound(),
		slots: make(chan struct{}, s.cfg.MaxInflight),
		done:  make(chan struct{}),
	}
	c.active.Store(monotime())
	return c
}

// close closes the connection. Replies not yet written are dropped. Safe to
// call from any goroutine, any number of times.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.out.close()
		close(c.done)
		c.nc.Close()
	})
}

// inflight returns the number of calls read whose replies are not written.
func (c *conn) inflight() int64 { return c.calls.Load() }

// readLoop is the connection's reader goroutine.
//
// While it works through calls already in its read buffer it holds the
// connection's output: replies made meanwhile, on this goroutine (a handler
// replying inline) or on others, are appended and left for it. Before it
// blocks, to read more or to wait for a slot, it writes what is pending
// itself, unless another goroutine is writing already. So a call answered
// inline costs no hand-off between goroutines, and the replies to a read
// buffer full of calls leave in one write.
func (c *conn) readLoop() {
	defer c.srv.wg.Done()
	defer c.srv.forget(c)
	defer c.close()

	if err := c.handshake(); err != nil {
		c.logHandshakeFailed(err)
		return
	}
	c.log = c.log.With("client", c.client.String())
	c.log.Debug("connection open", "codec", c.codec)
	c.srv.join(c)
	c.srv.wg.Add(1)
	go c.writeLoop()

	m := c.srv.metrics
	holding := false // this goroutine holds the output
	defer c.batch.End()
	for {
		if holding && !c.fr.buffered() {
			c.batch.End()
			holding = false
			c.unhold()
		}
		// The clock is read for the idle check once per read from the
		// socket, not for every call in the buffer, unless metrics time
		// every call.
		fresh := !c.fr.buffered()
		body, owned, err := c.fr.next()
		if err != nil {
			c.logEnd("read failed", err)
			return
		}
		var decodeStart int64
		if m != nil {
			decodeStart = monotime()
		}
		f, err := c.decode(body, &owned)
		if err != nil {
			c.log.Warn("closing connection: bad frame", "err", err)
			return
		}
		var now int64
		if fresh || m != nil {
			now = monotime()
			c.active.Store(now)
		}
		select {
		case c.slots <- struct{}{}:
		default:
			// At MaxInflight: the slots come back as replies are written,
			// those held here included.
			c.batch.End()
			if holding {
				holding = false
				c.unhold()
			}
			select {
			case c.slots <- struct{}{}:
			case <-c.done:
				return
			}
		}
		c.calls.Add(1)
		if c.idling.Load() {
			// The writer may be closing the connection as idle, having not
			// seen this call: it must not reach the handler. The client
			// resends it on a new connection.
			c.close()
			return
		}
		if !holding {
			c.out.hold()
			holding = true
		}
		call := newCall(c, &f, owned)
		if m != nil {
			call.start = now
			m.decode.Observe(seconds(now - decodeStart))
			m.inflight.Inc()
		}
		switch {
		case c.srv.shuttingDown.Load():
			call.Reply(StatusShuttingDown, nil)
		case c.srv.queues != nil:
			c.srv.queues.push(call)
		default:
			c.srv.h.Serve(call)
		}
	}
}

// unhold ends the reader's hold on the output, writing what is pending if
// nobody else is writing.
func (c *conn) unhold() {
	if c.out.unhold() {
		c.flush()
	}
}

// decode decodes a call frame's body, decompressing its payload if need be;
// a decompressed payload is a new slice, and *owned is set. Any error means
// the stream cannot be trusted.
func (c *conn) decode(body []byte, owned *bool) (frame, error) {
	f, err := decodeFrame(body)
	if err == nil && f.kind != kindCall {
		err = errUnexpectedKind(f.kind)
	}
	if err == nil && f.flags&flagForwarded != 0 && c.version < 3 {
		err = fmt.Errorf("%w: forwarded call on a version %d connection", errMalformed, c.version)
	}
	if err == nil && f.flags&flagToken != 0 && c.version < 4 {
		err = fmt.Errorf("%w: forwarded token on a version %d connection", errMalformed, c.version)
	}
	if err == nil && f.flags&flagEarly != 0 && c.version < 5 {
		err = fmt.Errorf("%w: early call on a version %d connection", errMalformed, c.version)
	}
	if err == nil && f.flags&flagCompressed != 0 {
		f.payload, err = c.srv.comp.decompress(c.codec, f.payload, c.srv.cfg.MaxFrame-callSize(&f.cred, nil))
		*owned = true
	}
	return f, err
}

// badHelloLines is how many failed handshakes a second a server logs at
// most, on average.
const badHelloLines = 5

// logHandshakeFailed logs a failed handshake, at most at the server's
// rate for them (a flood of bad connections must not fill the disk); a
// peer that simply went away is not logged.
func (c *conn) logHandshakeFailed(err error) {
	select {
	case <-c.done:
		return
	default:
	}
	if errors.Is(err, io.EOF) {
		return
	}
	level := slog.LevelWarn
	var se *StatusError
	if errors.As(err, &se) {
		level = slog.LevelInfo // refused: the peer was told why
	}
	c.srv.badHellos.Log(c.log, level, "handshake failed", "err", err)
}

// logEnd logs why the reader stopped, quietly when the connection simply
// ended.
func (c *conn) logEnd(msg string, err error) {
	select {
	case <-c.done:
		return // closed on purpose
	default:
	}
	if errors.Is(err, io.EOF) {
		c.log.Debug("connection closed by peer")
		return
	}
	var se *StatusError
	if errors.As(err, &se) {
		c.log.Info(msg, "err", err)
		return
	}
	c.log.Warn(msg, "err", err)
}

// reply queues call's reply, compressed if the connection compresses and it
// pays; see Call.Reply.
func (c *conn) reply(call *Call, status uint32, payload []byte) {
	if replySize(payload) > c.srv.cfg.MaxFrame {
		c.log.Error("reply exceeds MaxFrame; replying StatusInternal",
			"method", call.Method, "id", call.ID, "bytes", len(payload), "limit", c.srv.cfg.MaxFrame)
		status, payload = StatusInternal, nil
	}
	m := c.srv.metrics
	var (
		mm          *methodMetrics
		encodeStart int64
	)
	if m != nil {
		// Counted before the reply can reach the client, so that a client
		// that has its reply sees it counted.
		mm = m.replied(call.Method, status)
		encodeStart = monotime()
	}
	var r appendResult
	if z := c.srv.comp; c.codec != 0 && len(payload) > z.above {
		out, flags, scratch := z.compress(c.codec, payload)
		r = c.out.appendReply(call.wire, call.Method, status, flags, out)
		releaseScratch(scratch)
	} else {
		r = c.out.appendReply(call.wire, call.Method, status, 0, payload)
	}
	if m != nil {
		now := monotime()
		m.encode.Observe(seconds(now - encodeStart))
		mm.processing.Observe(seconds(now - call.start))
	}
	if r == mustWrite {
		// Nobody is writing or holding the output: this goroutine replies
		// outside the reader's hold, a handler of its own or a goroutine
		// the handler passed the call to. The only call in flight on an
		// otherwise quiet connection has its reply written at once, here;
		// with others in flight, more replies are likely to follow this
		// one, perhaps from this very goroutine, and the writer goroutine
		// gathers them into fewer writes.
		if c.calls.Load() <= 1 {
			c.flush()
		} else {
			c.out.handOff()
		}
	}
}

// flush writes what is pending, the caller owning the output's write side,
// then hands the write side to the writer goroutine if more frames came in
// meanwhile, or lets go of it.
func (c *conn) flush() {
	buf, frames := c.out.take()
	if buf == nil {
		return
	}
	ok := c.write(buf, frames)
	c.out.written(buf)
	if ok && c.out.settle() {
		c.out.handOff()
	}
}

// write writes buf, frames taken from the output by its owner, and gives
// their slots back. On failure it closes the connection and reports false.
func (c *conn) write(buf []byte, frames int) bool {
	// The deadline is moved only now and then, as moving a timer can cost
	// a wake-up of the runtime's network poller: a write may block for
	// IdleTimeout at most, 7/8 of it at least.
	if t, now := c.srv.cfg.IdleTimeout, monotime(); c.writeBy-now < int64(t-t/8) {
		c.nc.SetWriteDeadline(time.Now().Add(t))
		c.writeBy = now + int64(t)
	}
	if _, err := c.nc.Write(buf); err != nil {
		select {
		case <-c.done:
		default:
			c.log.Warn("closing connection: write failed", "err", err)
		}
		c.close()
		return false
	}
	c.active.Store(monotime())
	if m := c.srv.metrics; m != nil {
		m.framesPerWrite.Observe(float64(frames))
	}
	c.calls.Add(-int64(frames))
	for range frames {
		<-c.slots
	}
	return true
}

// writeLoop is the connection's writer goroutine: it writes the output
// handed to it, gives the slots back, and closes the connection when it has
// been idle for IdleTimeout.
func (c *conn) writeLoop() {
	defer c.srv.wg.Done()
	idleTimeout := c.srv.cfg.IdleTimeout
	idle := time.NewTimer(idleTimeout)
	defer idle.Stop()

	for {
		select {
		case <-c.out.ready:
		case <-idle.C:
			if quiet := c.quiet(); quiet < idleTimeout {
				idle.Reset(idleTimeout - quiet)
				continue
			}
			if c.idleClose() {
				c.log.Debug("closed idle connection")
				return
			}
			idle.Reset(idleTimeout)
			continue
		case <-c.done:
			return
		}
		// This goroutine owns the write side until nothing is pending.
		// It is handed the output only when replies come from several
		// goroutines or many at once; yielding before each take lets
		// those replying alongside it add to this write rather than the
		// next one.
		for {
			runtime.Gosched()
			buf, frames := c.out.take()
			if buf == nil {
				break
			}
			if !c.write(buf, frames) {
				return
			}
			c.out.written(buf)
		}
	}
}

// quiet returns how long the connection has had no traffic; 0 if a call is
// in flight.
func (c *conn) quiet() time.Duration {
	if c.inflight() > 0 {
		return 0
	}
	return time.Duration(monotime() - c.active.Load())
}

// idleClose closes the connection unless a call is in flight, and reports
// whether it did. The writer and the reader each write one flag and read
// the other's (idling here, calls in the reader), so that of a call being
// read and the connection closing for idleness at least one side sees the
// other: either the call counts and the connection stays, or the reader
// drops the call and closes.
func (c *conn) idleClose() bool {
	c.idling.Store(true)
	if c.inflight() > 0 {
		c.idling.Store(false)
		return false
	}
	c.close()
	return true
}

// epoch anchors monotime.
var epoch = time.Now()

// monotime returns monotonic nanoseconds since the process started; unlike
// wall-clock time it does not jump.
func monotime() int64 { return int64(time.Since(epoch)) }
