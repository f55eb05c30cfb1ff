package rpc

// Gone returns a channel that is closed when the connection the call came
// on closes, so that a handler holding a call for a while (a long poll)
// can stop waiting once nobody is left to read the reply. It must be
// called before Reply; the call must still be replied to, which then does
// nothing but release it.
func (c *Call) Gone() <-chan struct{} { return c.conn.done }
