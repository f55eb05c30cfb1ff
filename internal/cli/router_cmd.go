package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/internal/observe"
	"github.com/canopyfs/canopy/internal/router"
)

func newRouterCmd(g *globals) *cobra.Command {
	var listen, root, metricsListen, tlsCert, tlsKey, routerToken string
	var insecure bool
	var xEvery, xGrace time.Duration
	cmd := &cobra.Command{
		Use:   "router",
		Short: "Run a federation router in front of the metadata partitions",
		Long: `Run a federation router: it reads the mount and routing tables from the
root partition (--root, the metadata server(s) of partition 0), follows
their changes, and forwards each call to the partition that holds what it
names. Clients use it as they would a single metadata server; any number
of routers may serve the same partitions. It prints one line with "ready"
and its address once it serves, and stops on SIGINT or SIGTERM.`,
		Example: "  canopy router --listen 10.0.0.2:9400 --root 10.0.0.5:9400",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tlsCfg, err := serverTLS(tlsCert, tlsKey)
			if err != nil {
				return err
			}
			if _, err := checkExposure(listen, tlsCfg, insecure); err != nil {
				return err
			}
			var token string
			if routerToken != "" {
				data, err := os.ReadFile(routerToken)
				if err != nil {
					return fmt.Errorf("router token: %w", err)
				}
				token = strings.TrimSpace(string(data))
			}
			var roots []string
			for _, a := range strings.Split(root, ",") {
				if a = strings.TrimSpace(a); a != "" {
					roots = append(roots, a)
				}
			}
			if len(roots) == 0 {
				return fmt.Errorf("router: --root names no address")
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			cfg := router.Config{Listen: listen, Root: roots, Secret: g.secret, Token: token, TLS: tlsCfg, Logger: log,
				XRenameEvery: xEvery, XRenameGrace: xGrace}
			return runRouter(cmd, cfg, metricsListen, "router ready at", nil, nil)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", DefaultAddr, "address to serve on (port 0 picks a free one)")
	cmd.Flags().StringVar(&root, "root", "", "address(es) of the root partition's metadata server(s), comma-separated")
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus metrics, pprof and a status page on this address")
	addServerTLSFlags(cmd, &tlsCert, &tlsKey)
	cmd.Flags().BoolVar(&insecure, "insecure", false, "serve plain TCP on a non-loopback address (tokens and secrets cross the network in the clear)")
	cmd.Flags().StringVar(&routerToken, "router-token-file", "", "the router's own credential token (canopy auth add NAME --router), presented to the partitions")
	cmd.Flags().DurationVar(&xEvery, "xrename-every", 2*time.Second, "how often to settle renames across partitions left half done (negative: never)")
	cmd.Flags().DurationVar(&xGrace, "xrename-grace", 10*time.Second, "how long a rename across partitions may stay prepared before it is rolled back")
	cmd.MarkFlagRequired("root")
	return cmd
}

// routerStatus is what a router shows on its status page.
type routerStatus struct {
	Role          string `json:"role"`
	Addr          string `json:"addr"`
	TablesVersion uint64 `json:"tables_version"`
}

// runRouter starts a router, prints the ready line, and runs until a
// signal or until an error arrives on failed (nil: never).
//
// after, if not nil, starts what else serves through the router once its
// ready line is printed (canopy up's gateways) and returns what stops it.
func runRouter(cmd *cobra.Command, cfg router.Config, metricsListen, ready string, failed <-chan error,
	after func(addr string, log *slog.Logger) (func(), error)) error {
	if metricsListen != "" {
		cfg.Registry = observe.NewRegistry()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	r, err := router.Start(ctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer r.Close()
	if cfg.Registry != nil {
		obs, err := observe.Serve(metricsListen, cfg.Registry, func() any {
			return routerStatus{Role: "router", Addr: r.Addr(), TablesVersion: r.Version()}
		}, cfg.Logger)
		if err != nil {
			return err
		}
		defer obs.Close()
		cfg.Logger.Info("metrics", "addr", obs.Addr().String())
	}
	fmt.Fprintf(cmd.OutOrStdout(), "canopy: %s %s\n", ready, r.Addr())
	if after != nil {
		stop, err := after(r.Addr(), cfg.Logger)
		if err != nil {
			return err
		}
		defer stop()
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		cfg.Logger.Info("shutting down", "signal", s.String())
		return nil
	case err := <-failed:
		return err
	}
}
