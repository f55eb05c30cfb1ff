package rpc

import (
	"encoding/hex"
	"sync"
	"time"
)

// Cred is the identity a call is made with.
type Cred struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups, at most MaxGroups
}

// ClientID names a client for its lifetime, across reconnections.
type ClientID [16]byte

func (id ClientID) String() string { return hex.EncodeToString(id[:]) }

// Call is one received call.
//
// A Call belongs to the handler from Serve until it calls Reply, and to the
// package after: Payload is valid until Reply is called, and the Call must
// not be touched once Reply has been called. Cred.Groups is the call's own
// and may be kept.
type Call struct {
	// Client and ID name the call across retries: the caller, as named in
	// its hello, and the call id it chose, unique per client. For a call
	// forwarded on behalf of another client (see Client.Forward) they are
	// that client's.
	Client  ClientID
	ID      uint64
	Method  uint16
	Cred    Cred
	Payload []byte

	// Identity is what ServerConfig.Authenticate returned for the
	// connection the call came on (nil without it).
	Identity any

	// Token is the credential token a forwarded call carries for its
	// client (see Client.ForwardToken), or nil. It is the Call's until
	// Reply.
	Token []byte

	// Early is set when the caller asked to be answered once its change
	// is applied and ordered, without waiting for it to be durable
	// (ClientConfig.Early); what that means is the service's business.
	Early bool

	wire  uint64 // the call id on the connection, which the reply echoes
	batch *Batch // the connection reader's
	conn  *conn  // the connection the call came on; nil once replied
	buf   []byte // backing store for Payload, reused from call to call
	tok   []byte // backing store for Token, likewise

	start    int64         // monotime when the frame was decoded; 0 without metrics
	enqueued int64         // monotime when the call was queued, with queues
	queued   time.Duration // time spent in the queue, set when a handler takes it
}

// maxPooledPayload is the largest payload buffer a pooled Call keeps.
const maxPooledPayload = 64 << 10

var callPool = sync.Pool{New: func() any { return new(Call) }}

// newCall takes a Call from the pool and fills it from f, which came on cn.
// If owned, f.payload is a slice the Call may keep; otherwise it is copied.
func newCall(cn *conn, f *frame, owned bool) *Call {
	c := callPool.Get().(*Call)
	c.conn = cn
	c.Client = cn.client
	c.batch = &cn.batch
	c.ID = f.id
	c.wire = f.id
	if f.flags&flagForwarded != 0 {
		c.Client, c.ID = f.origin, f.originID
	}
	c.Method = f.method
	c.Early = f.flags&flagEarly != 0
	c.Cred = f.cred
	c.Identity = cn.ident
	c.Token = nil
	if f.token != nil {
		c.tok = append(c.tok[:0], f.token...)
		c.Token = c.tok
	}
	c.start, c.enqueued, c.queued = 0, 0, 0
	if owned {
		c.Payload = f.payload
	} else {
		c.buf = append(c.buf[:0], f.payload...)
		c.Payload = c.buf
	}
	return c
}

// Reply sends the call's reply. It must be called exactly once per call,
// from any goroutine, before or after Serve returns. The reply is encoded
// before Reply returns, so the caller may reuse payload. Replying to a call
// whose connection is gone does nothing.
func (c *Call) Reply(status uint32, payload []byte) {
	cn := c.conn
	if cn == nil {
		panic("rpc: Reply called twice for one call")
	}
	cn.reply(c, status, payload)
	c.conn = nil
	c.Cred = Cred{}
	c.Identity = nil
	c.Token = nil
	c.Payload = nil
	if cap(c.buf) > maxPooledPayload {
		c.buf = nil
	}
	callPool.Put(c)
}

// ReplyIn is Reply, leaving the reply for b to write when it ends: see
// Via returns the client id the hello of the connection the call came
// on named: the caller's own for a direct call, the forwarder's (a
// router's connection) for a forwarded one; zero once the call is
// answered.
func (c *Call) Via() ClientID {
	if c.conn == nil {
		return ClientID{}
	}
	return c.conn.client
}

// Batch. b nil is Reply.
func (c *Call) ReplyIn(b *Batch, status uint32, payload []byte) {
	if b != nil && c.conn != nil {
		b.holdServer(c.conn)
	}
	c.Reply(status, payload)
}

// Batch returns the batch of the connection reader that read the call.
// Only a Handler serving calls on the reader goroutine (a Server without
// queues) may use it, and only within Serve: the reader ends it when it
// has served every call it has read, before it blocks for more.
func (c *Call) Batch() *Batch { return c.batch }

// QueueTime returns how long the call waited in its server's queue before a
// handler took it: 0 for a server without queues.
func (c *Call) QueueTime() time.Duration { return c.queued }

// Handler serves calls.
//
// Without queues (ServerConfig.Queues nil), Serve runs on the connection's
// reader goroutine, which reads no further call until Serve returns. So
// Serve must not block: it either replies at once or hands the call to
// another goroutine, for example through a bounded queue, replying
// StatusBusy when the queue is full.
//
// With queues, Serve runs on one of the server's handler goroutines and may
// block; while every handler is busy, calls wait in the queues.
type Handler interface {
	Serve(c *Call)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(c *Call)

// Serve calls f(c).
func (f HandlerFunc) Serve(c *Call) { f(c) }
