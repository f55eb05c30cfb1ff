package router

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/balance"
	"github.com/canopyfs/canopy/internal/rpc"
)

// recoverMoves finishes, every interval until ctx ends, the moves of
// virtual partitions between groups whose mover stopped
// (balance.Recover): the router is stateless, and any router may take a
// move over once its record has gone unrenewed for balance.IntentTTL. It
// owns nothing but its timer.
func (r *Router) recoverMoves(ctx context.Context, every time.Duration) {
	defer r.wg.Done()
	env := balance.Env{Call: r.callDirect, Root: r.cfg.Root}
	owner := fmt.Sprintf("router %x", r.self[:4])
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		balance.Recover(ctx, env, owner, r.log)
	}
}

// callDirect sends one call as the superuser, with the router's
// credential, to the servers at addrs (following NOT_LEADER), on a
// connection of its own: a move's calls go to processes and replicas the
// pool may not know.
func (r *Router) callDirect(ctx context.Context, addrs []string, m pb.Method, req, reply proto.Message) error {
	c, err := rpc.DialAny(addrs, rpc.ClientConfig{Secret: r.cfg.Secret, Token: r.cfg.Token, Logger: r.log,
		CallTimeout: 10 * time.Second, OpTimeout: time.Minute})
	if err != nil {
		return fmt.Errorf("%s at %v: %w", m, addrs, err)
	}
	defer c.Close()
	var data []byte
	if req != nil {
		data, _ = proto.Marshal(req)
	}
	st, rep, err := c.Call(ctx, uint16(m), rpc.Cred{}, data)
	if err != nil {
		return fmt.Errorf("%s at %v: %w", m, addrs, err)
	}
	if st != 0 {
		var d pb.ErrorDetail
		if proto.Unmarshal(rep, &d) == nil && d.Message != "" {
			return fmt.Errorf("%s: %w", d.Message, syscall.Errno(st))
		}
		return fmt.Errorf("%s at %v: %w", m, addrs, syscall.Errno(st))
	}
	if reply != nil {
		if err := proto.Unmarshal(rep, reply); err != nil {
			return fmt.Errorf("%s at %v: reply: %w", m, addrs, err)
		}
	}
	return nil
}
