package rpc

import (
	"errors"
	"fmt"
)

// ErrNoConnection means a forwarded call found the client without a
// working connection. A redial has been started; the call may be tried
// again.
var ErrNoConnection = errors.New("rpc: no connection")

// Forward sends a call on behalf of another client, the one that sent it
// to the caller: the server sees the call as made by client from with call
// id id, so that its memory of calls already executed, keyed by client and
// call id, recognizes a retry whichever way it comes. It needs protocol
// version 3 on both ends.
//
// ForwardFunc receives the outcome of a forwarded call: the reply's status
// and payload (which belongs to it), or the error that kept the call from
// being answered. b, if not nil, is the batch of the goroutine calling it,
// for replies it passes on (Call.ReplyIn); it is valid only during the
// call.
type ForwardFunc func(status uint32, reply []byte, err error, b *Batch)

// Forward does not wait. done is called exactly once: from Forward itself
// if the call cannot be sent, otherwise from the goroutine that reads the
// reply, or that finds the connection broken. done must not block. If b is
// not nil, the call is written when b ends (see Batch). Forward neither retries nor
// times out: a call whose reply never comes is answered with an error when
// the connection breaks or the client is closed. A connection found broken
// is redialed in the background and the call fails with ErrNoConnection.
func (c *Client) Forward(b *Batch, from ClientID, id uint64, method uint16, cred *Cred, req []byte, done ForwardFunc) {
	c.ForwardToken(b, from, id, nil, method, cred, req, done)
}

// ForwardToken is Forward, passing on the client's credential token too
// (none if empty), for the server to check the call against; it needs
// protocol version 4 on both ends when there is a token. token is copied
// before ForwardToken returns.
func (c *Client) ForwardToken(b *Batch, from ClientID, id uint64, token []byte, method uint16, cred *Cred, req []byte, done ForwardFunc) {
	c.ForwardMarked(b, from, id, token, method, cred, req, asConfigured, done)
}

// ForwardMarked is ForwardToken with the call marked as mark says: a
// forwarded call goes unmarked (answered once durable) unless mark is
// MarkEarly. A router marks early a step of its own protocol whose
// durability a later step of the same partition waits for.
func (c *Client) ForwardMarked(b *Batch, from ClientID, id uint64, token []byte, method uint16, cred *Cred, req []byte, mark Mark, done ForwardFunc) {
	if len(token) > MaxToken {
		done(0, nil, fmt.Errorf("forward method %d: token of %d bytes, limit %d", method, len(token), MaxToken), nil)
		return
	}
	if len(cred.Groups) > MaxGroups {
		done(0, nil, fmt.Errorf("forward method %d: %d groups, limit %d", method, len(cred.Groups), MaxGroups), nil)
		return
	}
	o := origin{client: from, id: id, token: token}
	if n := callSize(cred, req) + o.size(); n > c.cfg.MaxFrame {
		done(0, nil, fmt.Errorf("forward method %d: %w: %d bytes, limit %d", method, ErrTooLarge, n, c.cfg.MaxFrame), nil)
		return
	}
	cn := c.cur.Load()
	if cn == nil || cn.broken.Load() {
		c.mu.Lock()
		closed := c.closed
		if !closed {
			c.redialLocked()
		}
		c.mu.Unlock()
		if closed {
			done(0, nil, ErrClosed, nil)
		} else {
			done(0, nil, ErrNoConnection, nil)
		}
		return
	}
	if cn.version < 3 || len(token) > 0 && cn.version < 4 {
		done(0, nil, fmt.Errorf("forward method %d: server speaks protocol version %d: %w", method, cn.version, &StatusError{Status: StatusBadVersion}), nil)
		return
	}
	w := forwardPool.Get().(*waiter)
	w.fn, w.mark = done, mark
	if b != nil {
		b.holdClient(cn)
	}
	if err := cn.send(w, c.nextID.Add(1), method, &o, cred, req); err != nil {
		// Never registered: nobody else holds w.
		w.fn = nil
		forwardPool.Put(w)
		done(0, nil, fmt.Errorf("forward method %d: %w", method, err), nil)
	}
}
