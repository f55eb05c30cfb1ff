package bench

import (
	"context"
	"fmt"
	"time"
)

// RPCConfig configures the null-call benchmark.
type RPCConfig struct {
	Run     Config
	Conns   Conns
	Payload int // bytes echoed by each call

	// CeilingTime is how long the harness ceiling (the runner driving a
	// no-op function at the same concurrency) is measured; 0 skips it.
	CeilingTime time.Duration
}

// RunRPC measures null calls (Ping): the transport and the server's
// dispatch with no namespace work, which is the ceiling of every metadata
// workload. Its own ceiling is the runner driving a function that does
// nothing: what the harness can issue at all.
func RunRPC(ctx context.Context, cfg RPCConfig) (*Result, error) {
	if len(cfg.Conns) == 0 {
		return nil, fmt.Errorf("rpc benchmark: no connections")
	}
	if cfg.Payload < 0 {
		return nil, fmt.Errorf("rpc benchmark: negative payload %d", cfg.Payload)
	}
	var ceiling float64
	if cfg.CeilingTime > 0 {
		r, err := Run(ctx, ceilingConfig(cfg.Run, cfg.CeilingTime), Func(func(context.Context, int) error { return nil }))
		if err != nil {
			return nil, fmt.Errorf("measure the no-op ceiling: %w", err)
		}
		ceiling = r.OpsPerSec
	}
	run := cfg.Run
	run.Label = "rpc"
	res, err := Run(ctx, run, Ping(cfg.Conns, cfg.Payload))
	if err != nil {
		return nil, fmt.Errorf("rpc benchmark: %w", err)
	}
	res.Mode, res.Op, res.Conns = "rpc", "null", len(cfg.Conns)
	res.Params = map[string]any{"payload": cfg.Payload}
	if cfg.CeilingTime > 0 {
		res.SetCeiling("noop", ceiling)
	}
	return res, nil
}

// Ping is the null-call workload: each operation is one Ping carrying
// payload bytes.
func Ping(cs Conns, payload int) Workload {
	data := make([]byte, payload)
	for i := range data {
		data[i] = byte(i)
	}
	return Func(func(ctx context.Context, w int) error {
		return cs.For(w).Ping(ctx, data)
	})
}

// ceilingConfig is run's concurrency in a closed loop of one round lasting
// d, after a short warm-up: the fastest the harness goes at that
// concurrency.
func ceilingConfig(run Config, d time.Duration) Config {
	return Config{
		Workers: run.Workers, Duration: d, Warmup: min(run.Warmup, d/4), Rounds: 1,
		Progress: run.Progress, Label: "ceiling", clock: run.clock,
	}
}
