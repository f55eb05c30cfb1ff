package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/internal/bench"
)

func newBenchRPCCmd(g *globals) *cobra.Command {
	var f benchFlags
	var clients, payload int
	cmd := &cobra.Command{
		Use:   "rpc",
		Short: "Measure null calls: the transport and dispatch, no namespace work",
		Long: `Measure null calls (Ping) from --clients concurrent callers spread over
--conns connections: the transport and the server's dispatch with no
namespace work, the ceiling of every metadata operation. Its own ceiling is
the runner driving a function that does nothing at the same concurrency.`,
		Example: "  canopy bench rpc --clients 50 --duration 5s\n  canopy bench rpc --clients 1 --json\n  canopy bench rpc --clients 64 --conns 4 --rate 20k --csv rpc.csv",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.session(g, func(ctx context.Context, cs bench.Conns) error {
				res, err := bench.RunRPC(ctx, bench.RPCConfig{
					Run: f.config(clients, cmd.ErrOrStderr()), Conns: cs, Payload: payload, CeilingTime: f.ceiling,
				})
				if err != nil {
					return err
				}
				return f.report(cmd.OutOrStdout(), []*bench.Result{res}, nil)
			})
		},
	}
	fl := cmd.Flags()
	f.bind(fl)
	clients = 16
	fl.Var(intCount{&clients, 1}, "clients", "concurrent callers, each with one call in flight")
	fl.Var(intCount{&payload, 0}, "payload", "bytes each call carries and the server echoes")
	return cmd
}
