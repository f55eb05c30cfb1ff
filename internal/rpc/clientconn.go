package rpc

import (
	"bytes"
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
}

var waiterPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{ch: make(chan result, 1), timer: t}
}}

// clientConn is one connection of a Client.
//
// Its reader goroutine (readLoop) owns fr and dispatches replies; its
// writer goroutine (writeLoop) owns the socket's write side. Callers on any
// goroutine register in waiting and append their calls to out, compressing
// them first if need be.
type clientConn struct {
	nc    net.Conn // a *tls.Conn with ClientConfig.TLS
	log   *slog.Logger
	comp  *compression
	codec Codec // set by the handshake: the connection's codec, 0 = none
	fr    frameReader
	out   outbound

	mu      sync.Mutex
	waiting map[uint64]*waiter // by call id
	err     error              // why the connection broke; nil while it works

	broken atomic.Bool   // err != nil, readable without mu
	done   chan struct{} // closed when the connection breaks
}

func newClientConn(nc net.Conn, log *slog.Logger, comp *compression) *clientConn {
	return &clientConn{
		nc:      nc,
		log:     log,
		comp:    comp,
		fr:      newFrameReader(nc, maxWelcomeFrame),
		out:     newOutbound(),
		waiting: make(map[uint64]*waiter),
		done:    make(chan struct{}),
	}
}

// send registers w as the waiter for call id and queues the call. It fails
// if the connection has already broken.
func (cn *clientConn) send(w *waiter, id uint64, method uint16, cred *Cred, req []byte) error {
	cn.mu.Lock()
	if cn.err != nil {
		err := cn.err
		cn.mu.Unlock()
		return err
	}
	cn.waiting[id] = w
	cn.mu.Unlock()
	// If the connection breaks now, fail has already answered w and the
	// call is dropped.
	if cn.codec != 0 && len(req) > cn.comp.above {
		out, flags, scratch := cn.comp.compress(cn.codec, req)
		cn.out.appendCall(id, method, flags, cred, out)
		releaseScratch(scratch)
	} else {
		cn.out.appendCall(id, method, 0, cred, req)
	}
	return nil
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
		w.ch <- result{err: err}
	}
	switch {
	case errors.Is(err, ErrClosed):
	case errors.Is(err, io.EOF):
		cn.log.Debug("connection closed by server", "calls_failed", len(waiting))
	default:
		cn.log.Warn("connection lost", "err", err, "calls_failed", len(waiting))
	}
}

// readLoop is the connection's reader goroutine.
func (cn *clientConn) readLoop(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		body, owned, err := cn.fr.next()
		if err != nil {
			cn.fail(fmt.Errorf("connection lost: read: %w", err))
			return
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
			cn.fail(fmt.Errorf("connection lost: bad frame from server: %w", err))
			return
		}
		cn.mu.Lock()
		w := cn.waiting[f.id]
		if w != nil {
			delete(cn.waiting, f.id)
		}
		cn.mu.Unlock()
		if w == nil {
			continue // its caller gave up
		}
		var payload []byte
		switch {
		case owned:
			payload = f.payload
		case len(f.payload) > 0:
			payload = bytes.Clone(f.payload)
		}
		w.ch <- result{status: f.status, payload: payload}
	}
}

// writeLoop is the connection's writer goroutine.
func (cn *clientConn) writeLoop(wg *sync.WaitGroup) {
	defer wg.Done()
	var buf []byte
	for {
		select {
		case <-cn.out.ready:
		case <-cn.done:
			return
		}
		// Yield once: callers woken alongside this goroutine get to add
		// their calls to this write rather than the next one.
		runtime.Gosched()
		buf, _ = cn.out.take(buf)
		if len(buf) == 0 {
			continue
		}
		if _, err := cn.nc.Write(buf); err != nil {
			cn.fail(fmt.Errorf("connection lost: write: %w", err))
			return
		}
		buf = buf[:0]
	}
}

// mayRetry reports whether err, received from a broken connection, allows a
// retry.
func mayRetry(err error) bool { return !errors.Is(err, ErrClosed) }
