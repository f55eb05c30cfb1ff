package cli

import (
	"context"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/balance"
	"github.com/canopyfs/canopy/internal/rpc"
)

// balanceEnv is how the balance commands reach the cluster: the tables
// through --addr (a router, or the root partition), any server by address.
func balanceEnv(g *globals) balance.Env {
	return balance.Env{
		Call: func(ctx context.Context, addrs []string, m pb.Method, req, reply proto.Message) error {
			return callAt(ctx, g, addrs, m, req, reply)
		},
		Root: splitList(g.addr),
	}
}

// callAt sends one call to the servers at addrs (a group's replicas, or one
// process), following NOT_LEADER, and decodes the reply into reply (nil:
// none). A refusal carries the server's message when it sent one.
func callAt(ctx context.Context, g *globals, addrs []string, m pb.Method, req, reply proto.Message) error {
	opts, err := g.clientOptions()
	if err != nil {
		return err
	}
	return balance.Dialer(rpc.ClientConfig{Secret: opts.Secret, TLS: opts.TLS, Token: opts.Token,
		CallTimeout: g.timeout, OpTimeout: g.timeout})(ctx, addrs, m, req, reply)
}
