package rpc

import "sync"

// maxIdleBuf is the largest output buffer kept between writes; a bigger one,
// grown for a large frame, is dropped so that it does not stay pinned.
const maxIdleBuf = 1 << 20

// outbound is a connection's pending output. Any goroutine may append
// encoded frames; mu is held only for the copy. The connection's writer
// goroutine takes everything pending in one swap and writes it without
// holding mu, so senders never wait on the network and a burst of frames
// leaves in one write.
type outbound struct {
	mu     sync.Mutex
	buf    []byte // encoded frames not yet taken by the writer
	frames int    // number of frames in buf
	closed bool   // the connection is gone: appends are dropped

	// ready has room for one token, sent when buf stops being empty; the
	// writer waits on it.
	ready chan struct{}
}

func newOutbound() outbound {
	return outbound{ready: make(chan struct{}, 1)}
}

// appendReply queues a reply frame. It reports false if the connection is
// closed and the frame was dropped.
func (o *outbound) appendReply(id uint64, method uint16, status uint32, flags uint8, payload []byte) bool {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	wake := len(o.buf) == 0
	o.buf = appendReply(o.buf, id, method, status, flags, payload)
	o.frames++
	o.mu.Unlock()
	if wake {
		o.wake()
	}
	return true
}

// appendCall queues a call frame. It reports false if the connection is
// closed and the frame was dropped.
func (o *outbound) appendCall(id uint64, method uint16, flags uint8, cred *Cred, payload []byte) bool {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	wake := len(o.buf) == 0
	o.buf = appendCall(o.buf, id, method, flags, cred, payload)
	o.frames++
	o.mu.Unlock()
	if wake {
		o.wake()
	}
	return true
}

func (o *outbound) wake() {
	select {
	case o.ready <- struct{}{}:
	default: // a token is already waiting; the writer will take our frame too
	}
}

// take returns everything pending and how many frames it holds, and gives
// spare, a buffer the writer is done with, to the next appends. Only the
// writer goroutine calls take.
func (o *outbound) take(spare []byte) (buf []byte, frames int) {
	if cap(spare) > maxIdleBuf {
		spare = nil
	}
	o.mu.Lock()
	buf, frames = o.buf, o.frames
	o.buf, o.frames = spare[:0], 0
	o.mu.Unlock()
	return buf, frames
}

// close drops what is pending; later appends are dropped too.
func (o *outbound) close() {
	o.mu.Lock()
	o.closed = true
	o.buf, o.frames = nil, 0
	o.mu.Unlock()
}
