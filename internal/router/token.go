package router

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"sync/atomic"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Clients' credentials through the router. The router judges no
// credential: it takes the token a client presents in its hello (if it
// parses), or the certificate it presented (acceptCert), binds it to the
// connection, and passes it on with every call
// it forwards for that client (rpc.Client.ForwardToken), including the
// calls it makes to several partitions for one client call. The partition
// checks the token and the call against its credentials as if the client
// had come directly; it believes the passed-on token only from a
// connection bound to a router credential (Config.Token), or to none.

// clientToken is the token a client connection presented.
type clientToken []byte

// acceptToken is the router's rpc.ServerConfig.Authenticate: a token
// that does not parse is refused at once; the partition judges the rest.
// Every connection gets a clientConn (session.go), with or without a token.
func acceptToken(token []byte, _ net.Addr) (any, error) {
	if len(token) == 0 {
		return &clientConn{}, nil
	}
	if _, err := auth.ParseToken(string(token)); err != nil {
		return nil, err
	}
	return &clientConn{token: append(clientToken(nil), token...)}, nil
}

// acceptCert is the router's rpc.ServerConfig.AuthenticateCert, for a
// client that presented a certificate its listener verified (Config.TLS
// with ClientCAs) and no token: the connection passes the certificate on
// as a certificate token (auth.CertToken), which the partitions resolve
// to the credential that names the certificate, with every check as for
// a token; a certificate no credential names is refused there.
func acceptCert(cert *x509.Certificate, _ net.Addr) (any, error) {
	return &clientConn{token: auth.CertToken(auth.Fingerprint(cert))}, nil
}

// origin is the client a call spanning partitions is made for.
type origin struct {
	client rpc.ClientID
	token  clientToken
	sess   *clientSession // the client's session at the router (session.go); nil for none
}

type originKey struct{}

// originOf returns the origin of call c, on the reader goroutine of its
// connection: nil unless its client presented a token (without one, the
// calls spanning partitions are the router's own).
func (r *Router) originOf(c *rpc.Call) *origin {
	cc, _ := c.Identity.(*clientConn)
	if cc == nil || cc.token == nil {
		return nil
	}
	return &origin{client: c.Client, token: cc.token, sess: r.sessionOf(cc, c.Client)}
}

// withOrigin returns ctx carrying o, if it is not nil.
func withOrigin(ctx context.Context, o *origin) context.Context {
	if o == nil {
		return ctx
	}
	return context.WithValue(ctx, originKey{}, o)
}

func originIn(ctx context.Context) *origin {
	o, _ := ctx.Value(originKey{}).(*origin)
	return o
}

// spanIDs numbers the calls made for a client across partitions: reads,
// never answered from a retry cache, so only unique per router.
var spanIDs atomic.Uint64

// forwardWait makes one call for o through cl and waits for its reply.
func forwardWait(ctx context.Context, cl *rpc.Client, o *origin, m pb.Method, cred rpc.Cred, req []byte, mark rpc.Mark) (uint32, []byte, error) {
	type result struct {
		status uint32
		reply  []byte
		err    error
	}
	ch := make(chan result, 1)
	id := 1<<63 | spanIDs.Add(1)
	cl.ForwardMarked(nil, o.client, id, o.token, uint16(m), &cred, req, mark, func(status uint32, reply []byte, err error, _ *rpc.Batch) {
		ch <- result{status, reply, err}
	})
	select {
	case r := <-ch:
		return r.status, r.reply, r.err
	case <-ctx.Done():
		return 0, nil, fmt.Errorf("%s for client %v: %w", m, o.client, ctx.Err())
	}
}
