package server

import (
	"fmt"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Sessions through routers. A client behind a router reaches a partition
// only as calls the router forwards for it on the router's own
// connections, so the partition never sees the client's connection close.
// The router sees it: when a client's last connection to it closes, it
// sends SESSION_END, forwarded for that client, to every partition the
// client's calls went to, and the partition ends the client's session as
// it would on the close of a direct connection: its locks released at
// once, its opens closed by a logged session end (replicated like any
// record, so the files it held open are freed on every replica and stay
// freed across a failover). The router sends it on the connections its
// other calls for that client went on, after them, so the partition reads
// it after every call of the client's.
//
// A client may leave one router for another that is up too (its
// connection to the first broke and it redialed the next address): the
// first router's SESSION_END must not end the session the client goes on
// with through the second. The lease table notes the connection each
// client was last heard on, and a router's connections name it
// (protocol.RouterConnID); a SESSION_END for a client last heard through
// another router within the lock timeout is answered and not acted on.
// The first router waits a moment before it sends it, and the client
// sends its heartbeats as soon as its connection breaks, which redials
// (client/locks.go), so the partition hears it through the second router
// first.

// errNotRouter refuses SESSION_END from a client credential (EPERM).
var errNotRouter = fmt.Errorf("%w: only a router may end another client's session", auth.ErrNotAdmin)

// serveSessionEnd answers SESSION_END, on the call's reader goroutine.
// Only a connection with no credential (where none is required) or one
// bound to a router or admin credential may end other clients' sessions;
// a client that still has a connection of its own to this server keeps
// its session, which that connection's close ends.
func (in *intake) serveSessionEnd(c *rpc.Call, sess *session) {
	if sess != nil && !sess.cred.Router && !sess.cred.Admin {
		in.access.refuse(c, pb.Method_SESSION_END, sess, errNotRouter)
		return
	}
	if in.gate != nil && !in.gate(c) {
		return
	}
	if in.connected != nil && in.connected(c.Client) {
		c.Reply(0, nil)
		return
	}
	if in.leases.elsewhere(c.Client, c.Via(), time.Now().Add(-in.locks.Timeout())) {
		// Heard through another router since: it moved there. Its lease
		// (renewed there) or that router's SESSION_END ends it.
		in.log.Debug("session end of a client heard through another router ignored", "client", c.Client.String())
		c.Reply(0, nil)
		return
	}
	in.endSession(c.Client, c)
}
