package rpc

import "errors"

// ErrSilent is the error of the calls in flight on a connection that was
// abandoned because its server stopped answering it (see Client.Abandon).
// The server may or may not have executed them: they may be retried with
// their call ids.
var ErrSilent = errors.New("rpc: server silent")

// Abandon breaks the connection in use, failing every call in flight on
// it (a forwarded call's ForwardFunc and a waiting Call alike) with err,
// which should wrap ErrSilent, and starts a redial. It is for a server
// found silent on a connection that has not broken, such as a stopped
// process whose kernel still holds the socket open: without it, those
// calls wait for the server for as long as it is stopped. Until the redial
// completes, Forward fails at once with ErrNoConnection and Call waits for
// the redial. A client of several servers (DialAny) redials the next one
// first, trying the silent one last. Abandon may be called from any
// goroutine.
func (c *Client) Abandon(err error) {
	cn := c.cur.Load()
	if cn == nil {
		return
	}
	c.mu.Lock()
	if n := len(c.addrs); n > 1 && !c.closed && c.cur.Load() == cn {
		c.at.Store((c.at.Load() + 1) % int64(n))
	}
	c.mu.Unlock()
	cn.fail(err)
	c.mu.Lock()
	if !c.closed && c.cur.Load() == cn {
		c.redialLocked()
	}
	c.mu.Unlock()
}
