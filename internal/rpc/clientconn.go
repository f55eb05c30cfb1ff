package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// result is what a waiting caller receives: a reply, or the error that broke
// the connection.
type result struct {
	status  uint32
	payload []byte
	err     error
}

// waiter is one caller's mailbox, reused from call to call. Whoever removes
// it from a connection's waiting map sends it exactly one result, so ch
// never holds a stale one when the waiter goes back to the pool.
type waiter struct {
	ch    chan result // capacity 1
	timer *time.Timer // stopped whenever the waiter is idle

	// fn, if set, receives the result instead of ch: the waiter of a
	// forwarded call (see Client.Forward), which nobody waits on.
	fn ForwardFunc
	// mark is how the caller's own call is to be answered (CallMarked).
	mark Mark
}

// deliver hands w its result; b is the receiving goroutine's batch, if it
// has one. A forwarded call's waiter goes back to forwardPool first: the
// one delivering is the last to hold it.
func (w *waiter) deliver(r result, b *Batch) {
	if fn := w.fn; fn != nil {
		w.fn = nil
		forwardPool.Put(w)
		fn(r.status, r.payload, r.err, b)
		return
	}
	w.ch <- r
}

// forwardPool holds the waiters of forwarded calls, which need neither a
// channel nor a timer.
var forwardPool = sync.Pool{New: func() any { return new(waiter) }}

var waiterPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{ch: make(chan result, 1), timer: t}
}}

// clientConn is one connection of a Client.
//
// Callers on any goroutine register in waiting and append their calls to
// out, compressing them first if need be. The socket's two sides each
// belong to one goroutine at a time:
//
//   - The write side, as out arbitrates: a caller whose call is the only
//     one in flight writes it at once itself; with others in flight, calls
//     go to the writer goroutine (writeLoop), which gathers those made
//     together into one write.
//   - The read side (fr and the socket's reads), as reading says: a caller
//     that finds nobody reading reads the connection itself until its reply
//     comes, for at most directRead, passing on the replies of others it
//     meets; otherwise the reader goroutine (readLoop) reads and hands each
//     reply to its caller. A call made alone is thus sent and answered with
//     no goroutine woken on the client side. Whoever reads lets go of the
//     read side once no call is waiting, handing it to the reader goroutine
//     if calls remain.
//
// The reader goroutine also watches a connection left unread for
// watchAfter, so that its loss is noticed while it is idle; on a connection
// in use the loss is noticed by whoever reads next.
type clientConn struct {
	nc      net.Conn // a *tls.Conn with ClientConfig.TLS
	log     *slog.Logger
	comp    *compression
	codec   Codec  // set by the handshake: the connection's codec, 0 = none
	version uint16 // set by the handshake: the protocol version spoken
	early   uint8  // flagEarly on the client's own calls (ClientConfig.Early, version 5 on), else 0
	out     outbound

	// writeBy is when, in monotime, the socket's write deadline falls.
	// Only the owner of out's write side touches it.
	writeBy     int64
	callTimeout time.Duration // ClientConfig.CallTimeout

	// fr and readBy belong to the owner of the read side. readBy is when,
	// in monotime, the socket's read deadline falls, 0 for none: callers
	// read with one, the reader goroutine without.
	fr     frameReader
	readBy int64

	mu      sync.Mutex
	waiting map[uint64]*waiter // by call id
	err     error              // why the connection broke; nil while it works
	reading bool               // a goroutine owns the read side

	// forwarding is set by the first forwarded call: from then on the
	// reader goroutine keeps the read side even with no call waiting, as
	// nobody waits on a forwarded call to read its reply, and handing the
	// read side back for every burst would cost a wake-up each time.
	forwarding bool
	unread     int64 // when the read side was last let go, in monotime

	// readTurn has room for one token, sent by a read side owner that
	// hands it to the reader goroutine.
	readTurn chan struct{}

	broken atomic.Bool   // err != nil, readable without mu
	done   chan struct{} // closed when the connection breaks

	onBroken func() // ClientConfig.OnBroken; set before the connection's goroutines start
}

const (
	// directRead is how long, at most, a caller reads the connection for
	// its own reply before it leaves the reading to the reader goroutine
	// and waits as other callers do: at least half as long. It is also
	// how late the caller may notice that its context is done, or that its
	// attempt's time is up.
	directRead = 2 * time.Millisecond

	// watchAfter is how long a connection's read side may be left unread
	// before the reader goroutine takes it back to watch the connection.
	// The first call after that is read by the reader goroutine.
	watchAfter = 10 * time.Millisecond
)

func newClientConn(nc net.Conn, log *slog.Logger, comp *compression, callTimeout time.Duration) *clientConn {
	return &clientConn{
		nc:          nc,
		log:         log,
		comp:        comp,
		callTimeout: callTimeout,
		fr:          newFrameReader(nc, maxWelcomeFrame),
		out:         newOutbound(),
		waiting:     make(map[uint64]*waiter),
		reading:     true, // the reader goroutine's, from the start
		readTurn:    make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
}

// send registers w as the waiter for call id and queues the call, a
// forwarded one if from is set. It fails if the connection has already
// broken. A waiter with fn set has nobody to read its reply: if nobody is
// reading, send hands the read side to the reader goroutine.
//
// A call that is the only one in flight is written at once, on the
// caller's goroutine, if nobody is writing. Otherwise the frame joins the
// write in progress or goes to the writer goroutine.
func (cn *clientConn) send(w *waiter, id uint64, method uint16, from *origin, cred *Cred, req []byte) error {
	cn.mu.Lock()
	if cn.err != nil {
		err := cn.err
		cn.mu.Unlock()
		return err
	}
	cn.waiting[id] = w
	alone := len(cn.waiting) == 1
	read := false
	if w.fn != nil {
		cn.forwarding = true
		if !cn.reading {
			cn.reading, read = true, true
		}
	}
	// The frame is appended under mu, so that no reply or failure reaches
	// w, whose caller may then reuse cred and req, before they are copied.
	var r appendResult
	var early uint8
	switch {
	case w.mark == MarkEarly && cn.version >= 5:
		early = flagEarly
	case w.mark == asConfigured && from == nil:
		early = cn.early // a forwarded call's mark is not passed on
	}
	if cn.codec != 0 && len(req) > cn.comp.above {
		out, flags, scratch := cn.comp.compress(cn.codec, req)
		r = cn.out.appendCall(id, method, flags|early, from, cred, out)
		releaseScratch(scratch)
	} else {
		r = cn.out.appendCall(id, method, early, from, cred, req)
	}
	cn.mu.Unlock()
	if read {
		cn.handRead()
	}
	// If the connection breaks now, fail has already answered w and the
	// frame is dropped.
	if r == mustWrite {
		if alone {
			cn.flush()
		} else {
			cn.out.handOff()
		}
	}
	return nil
}

// flush writes what is pending, the caller owning the output's write side,
// then hands the write side to the writer goroutine if more calls came in
// meanwhile, or lets go of it.
func (cn *clientConn) flush() {
	buf, _ := cn.out.take()
	if buf == nil {
		return
	}
	ok := cn.write(buf)
	cn.out.written(buf)
	if ok && cn.out.settle() {
		cn.out.handOff()
	}
}

// write writes buf, taken from the output by the write side's owner. A
// write blocked for CallTimeout (at least 7/8 of it) breaks the
// connection: every call in it would have timed out anyway, and part of a
// frame may have gone out. The deadline is moved only now and then, as
// moving a timer can cost a wake-up of the runtime's network poller.
func (cn *clientConn) write(buf []byte) bool {
	if now := monotime(); cn.writeBy-now < int64(cn.callTimeout-cn.callTimeout/8) {
		cn.nc.SetWriteDeadline(time.Now().Add(cn.callTimeout))
		cn.writeBy = now + int64(cn.callTimeout)
	}
	if _, err := cn.nc.Write(buf); err != nil {
		cn.fail(fmt.Errorf("connection lost: write: %w", err))
		return false
	}
	return true
}

// receive reads the reply to call id, whose waiter is w, on the caller's
// goroutine, if nobody else is reading; see clientConn. It reads for at
// most directRead. If it reports false, the reply, or the error that broke
// the connection, comes on w.ch.
func (cn *clientConn) receive(w *waiter, id uint64) (r result, ok bool) {
	cn.mu.Lock()
	if cn.reading || cn.waiting[id] != w {
		cn.mu.Unlock()
		return result{}, false
	}
	cn.reading = true
	cn.mu.Unlock()
	// The read deadline is left in place from call to call and moved
	// only once half of directRead is gone, as moving a timer can cost a
	// wake-up of the runtime's network poller.
	if now := monotime(); cn.readBy-now < int64(directRead/2) {
		cn.nc.SetReadDeadline(time.Now().Add(directRead))
		cn.readBy = now + int64(directRead)
	}
	var b Batch
	defer b.End()
	for {
		if !cn.fr.buffered() {
			b.End()
		}
		got, _, r, err := cn.readReply(w, &b)
		if err != nil {
			if err == errReadTimeout {
				// The reply is slow: leave the reading, mid-frame
				// perhaps, to the reader goroutine.
				cn.handRead()
				return result{}, false
			}
			cn.fail(err) // answers w too
			return result{}, false
		}
		if got {
			return r, true
		}
	}
}

// errReadTimeout is what readReply returns when a caller's read deadline
// passes; the read side is still the caller's.
var errReadTimeout = errors.New("read deadline passed")

// readReply reads the next frame, for the owner of the read side, and
// gives the reply to its caller: to the calling goroutine if its waiter is
// self (got is then set), through its waiter's channel (or callback, with
// the reader's batch b) otherwise. The
// owner lets go of the read side here once no call is waiting, and a caller
// whose reply came hands it to the reader goroutine if calls are still
// waiting; own reports whether the read side is still the owner's. Any
// error but errReadTimeout must break the connection.
func (cn *clientConn) readReply(self *waiter, b *Batch) (got, own bool, r result, err error) {
	body, owned, err := cn.fr.next()
	if err != nil {
		if cn.readBy != 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			return false, true, r, errReadTimeout
		}
		return false, true, r, fmt.Errorf("connection lost: read: %w", err)
	}
	f, err := decodeFrame(body)
	if err == nil && f.kind != kindReply {
		err = errUnexpectedKind(f.kind)
	}
	if err == nil && f.flags&flagCompressed != 0 {
		f.payload, err = cn.comp.decompress(cn.codec, f.payload, cn.fr.max-headerSize)
		owned = true
	}
	if err != nil {
		return false, true, r, fmt.Errorf("connection lost: bad frame from server: %w", err)
	}
	// The frame must be done with before the read side is let go: the
	// next owner reads into the buffer it aliases.
	r.status = f.status
	switch {
	case owned:
		r.payload = f.payload
	case len(f.payload) > 0:
		r.payload = bytes.Clone(f.payload)
	}
	cn.mu.Lock()
	w := cn.waiting[f.id]
	if w != nil {
		delete(cn.waiting, f.id)
	}
	own = true
	handOff := false
	switch {
	case len(cn.waiting) == 0 && (!cn.forwarding || self != nil):
		cn.reading, own = false, false
		cn.unread = monotime()
	case self != nil && w == self:
		handOff, own = true, false
	}
	cn.mu.Unlock()
	if handOff {
		cn.handRead()
	}
	if w == nil {
		return false, own, result{}, nil // its caller gave up
	}
	if w == self {
		return true, own, r, nil
	}
	w.deliver(r, b)
	return false, own, result{}, nil
}

// handRead passes the read side from its owner to the reader goroutine.
func (cn *clientConn) handRead() {
	select {
	case cn.readTurn <- struct{}{}:
	default: // cannot happen while only owners send; never block
	}
}

// forget unregisters w, the waiter for call id, after the caller gave up on
// it. If a result was already on its way to w, forget waits for it and
// returns it with ok set.
func (cn *clientConn) forget(w *waiter, id uint64) (r result, ok bool) {
	cn.mu.Lock()
	if cn.waiting[id] == w {
		delete(cn.waiting, id)
		cn.mu.Unlock()
		return result{}, false
	}
	cn.mu.Unlock()
	return <-w.ch, true
}

// fail breaks the connection, answering every waiting caller with err.
// The first call wins; later ones do nothing.
func (cn *clientConn) fail(err error) {
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return
	}
	cn.err = err
	cn.broken.Store(true)
	waiting := cn.waiting
	cn.waiting = nil
	cn.mu.Unlock()

	cn.out.close()
	close(cn.done)
	cn.nc.Close()
	for _, w := range waiting {
		w.deliver(result{err: err}, nil)
	}
	if cn.onBroken != nil && !errors.Is(err, ErrClosed) {
		cn.onBroken()
	}
	switch {
	case errors.Is(err, ErrClosed):
	case errors.Is(err, errMoved):
		cn.log.Debug("left a replica for its leader", "calls_moved", len(waiting))
	case errors.Is(err, io.EOF):
		cn.log.Debug("connection closed by server", "calls_failed", len(waiting))
	default:
		cn.log.Warn("connection lost", "err", err, "calls_failed", len(waiting))
	}
}

// readLoop is the connection's reader goroutine. It reads whenever it owns
// the read side: from the start, when a caller hands it over, and when the
// read side has been left unread for watchAfter.
func (cn *clientConn) readLoop(wg *sync.WaitGroup) {
	defer wg.Done()
	watch := time.NewTimer(watchAfter)
	defer watch.Stop()
	for {
		if cn.readBy != 0 {
			cn.nc.SetReadDeadline(time.Time{})
			cn.readBy = 0
		}
		var b Batch
		for own := true; own; {
			if !cn.fr.buffered() {
				b.End()
			}
			var err error
			if _, own, _, err = cn.readReply(nil, &b); err != nil {
				b.End()
				cn.fail(err)
				return
			}
		}
		b.End()
		watch.Reset(watchAfter)
	wait:
		for {
			select {
			case <-cn.readTurn:
				break wait
			case <-watch.C:
				if d := cn.watch(); d > 0 {
					watch.Reset(d)
					continue
				}
				break wait
			case <-cn.done:
				return
			}
		}
	}
}

// watch takes the read side for the reader goroutine if it has been left
// unread for watchAfter, and returns 0; otherwise it returns how long to
// wait before looking again.
func (cn *clientConn) watch() time.Duration {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.reading {
		return watchAfter
	}
	if unread := time.Duration(monotime() - cn.unread); unread < watchAfter {
		return watchAfter - unread
	}
	cn.reading = true
	return 0
}

// writeLoop is the connection's writer goroutine. It is handed the write
// side when calls are made while others are in flight.
func (cn *clientConn) writeLoop(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-cn.out.ready:
		case <-cn.done:
			return
		}
		for {
			// Yield: callers woken alongside this goroutine get to add
			// their calls to this write rather than the next one.
			runtime.Gosched()
			buf, _ := cn.out.take()
			if buf == nil {
				break
			}
			if !cn.write(buf) {
				return
			}
			cn.out.written(buf)
		}
	}
}

// mayRetry reports whether err, received from a broken connection, allows a
// retry.
func mayRetry(err error) bool { return !errors.Is(err, ErrClosed) }
