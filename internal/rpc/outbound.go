package rpc

import "sync"

// maxIdleBuf is the largest output buffer kept between writes; a bigger one,
// grown for a large frame, is dropped so that it does not stay pinned.
const maxIdleBuf = 1 << 20

// outbound is a connection's pending output and the ownership of its
// socket's write side.
//
// Any goroutine may append encoded frames; mu is held only for the copy.
// At most one goroutine at a time owns the write side (writing): it takes
// everything pending in one swap and writes it without holding mu, so
// appenders never wait on the network, a burst of frames leaves in one
// write, and frames leave in the order they were appended. The owner looks
// at the pending output again, under mu, before it lets go, so a frame
// appended during its write is never stranded: the owner writes it too or
// hands it to the connection's writer goroutine.
//
// An appender that finds nobody writing and nothing held becomes the owner
// (append reports mustWrite) and either writes at once itself (flush) or
// hands the ownership to the writer goroutine (handOff), which waits on
// ready. A server's reader may also hold the output (hold) while it works
// through the calls already in its read buffer, and so may a Batch:
// appends then leave their frames for the holders, and the last of them to
// let go flushes them, or sees that another goroutine is writing, before
// it next blocks (unhold).
//
// Invariant: whenever buf holds a frame, writing is set or holds is
// positive, so somebody is bound to write it.
type outbound struct {
	mu      sync.Mutex
	buf     []byte // encoded frames not yet taken by the owner
	frames  int    // number of frames in buf
	closed  bool   // the connection is gone: appends are dropped
	writing bool   // a goroutine owns the write side
	holds   int    // holders that will flush before they block

	// spare is the buffer the owner last wrote, given to the appends that
	// follow its next take. Only the owner touches it.
	spare []byte

	// ready has room for one token, sent by an owner that hands the write
	// side to the writer goroutine; the writer waits on it. Since only the
	// owner sends it, at most one token is ever pending.
	ready chan struct{}
}

func newOutbound() outbound {
	return outbound{ready: make(chan struct{}, 1)}
}

// appendResult says what an append leaves its caller to do.
type appendResult uint8

const (
	// queued: somebody already owns or holds the output and will write
	// the frame.
	queued appendResult = iota
	// mustWrite: the caller now owns the write side. It must flush, or
	// handOff to the writer goroutine.
	mustWrite
	// dropped: the connection is closed and the frame was dropped.
	dropped
)

// claim settles an append made under mu: the caller becomes the owner if
// nobody writes or holds. Called with mu held; unlocks it.
func (o *outbound) claim() appendResult {
	if o.writing || o.holds > 0 {
		o.mu.Unlock()
		return queued
	}
	o.writing = true
	o.mu.Unlock()
	return mustWrite
}

// appendReply appends a reply frame.
func (o *outbound) appendReply(id uint64, method uint16, status uint32, flags uint8, payload []byte) appendResult {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return dropped
	}
	o.buf = appendReply(o.buf, id, method, status, flags, payload)
	o.frames++
	return o.claim()
}

// appendCall appends a call frame.
func (o *outbound) appendCall(id uint64, method uint16, flags uint8, from *origin, cred *Cred, payload []byte) appendResult {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return dropped
	}
	o.buf = appendCallFrom(o.buf, id, method, flags, from, cred, payload)
	o.frames++
	return o.claim()
}

// take, for the owner, returns everything pending and how many frames it
// holds. If nothing is pending it gives up the write side and returns nil:
// the caller is no longer the owner.
func (o *outbound) take() (buf []byte, frames int) {
	o.mu.Lock()
	if len(o.buf) == 0 || o.closed {
		o.writing = false
		o.mu.Unlock()
		return nil, 0
	}
	buf, frames = o.buf, o.frames
	o.buf, o.frames = o.spare[:0], 0
	o.spare = nil
	o.mu.Unlock()
	return buf, frames
}

// written, for the owner, gives back a buffer it took and wrote, for reuse.
func (o *outbound) written(buf []byte) {
	if cap(buf) <= maxIdleBuf {
		o.spare = buf[:0]
	}
}

// settle, for the owner after a write: if nothing more is pending it gives
// up the write side and reports false; otherwise the caller is still the
// owner and must write again or hand off.
func (o *outbound) settle() bool {
	o.mu.Lock()
	more := len(o.buf) > 0 && !o.closed
	if !more {
		o.writing = false
	}
	o.mu.Unlock()
	return more
}

// handOff, for the owner, passes the write side to the writer goroutine.
func (o *outbound) handOff() {
	select {
	case o.ready <- struct{}{}:
	default: // cannot happen while only owners send; never block
	}
}

// hold marks the output as held, by the server's reader or a Batch:
// appends leave their frames for the holders.
func (o *outbound) hold() {
	o.mu.Lock()
	o.holds++
	o.mu.Unlock()
}

// unhold ends one hold. It reports true, making the caller the owner, if
// it was the last hold and frames are pending that nobody is writing;
// otherwise the owner in place or another holder writes them.
func (o *outbound) unhold() bool {
	o.mu.Lock()
	if o.holds > 0 {
		o.holds--
	}
	if o.holds > 0 || o.writing || len(o.buf) == 0 || o.closed {
		o.mu.Unlock()
		return false
	}
	o.writing = true
	o.mu.Unlock()
	return true
}

// close drops what is pending; later appends are dropped too.
func (o *outbound) close() {
	o.mu.Lock()
	o.closed = true
	o.buf, o.frames = nil, 0
	o.mu.Unlock()
}
