package router

import (
	"context"
	"fmt"
	"time"

	"github.com/canopyfs/canopy/internal/balance"
	"github.com/canopyfs/canopy/internal/rpc"
)

// recoverMoves finishes, every interval until ctx ends, the moves of
// virtual partitions between groups whose mover stopped
// (balance.Recover): the router is stateless, and any router may take a
// move over once its record has gone unrenewed for balance.IntentTTL. Its
// calls go on connections of their own, with the router's credential: a
// move's calls go to processes and replicas the pool may not know. It
// owns nothing but its timer.
func (r *Router) recoverMoves(ctx context.Context, every time.Duration) {
	defer r.wg.Done()
	env := balance.Env{Root: r.cfg.Root, Call: balance.Dialer(rpc.ClientConfig{Secret: r.cfg.Secret, Token: r.cfg.Token,
		Logger: r.log, CallTimeout: 10 * time.Second, OpTimeout: time.Minute})}
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
