package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopyfs/canopy/internal/observe"
	"github.com/canopyfs/canopy/internal/server"
)

func newUpCmd(g *globals) *cobra.Command {
	var dir, listen, metricsListen, tlsCert, tlsKey string
	var partitions int
	var lockTimeout time.Duration
	var st storageFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a complete single-node Canopy in the foreground",
		Long: `Run a complete single-node Canopy in the foreground: a metadata server
keeping its state under --dir, file data in the object store --storage
names (default: the directory DIR/objects), and the collector that removes
the objects of deleted data. It prints one line with "ready" and the
address once it serves, and stops cleanly on SIGINT or SIGTERM.

With --partitions N (N > 1) it runs N metadata partitions (ids 0..N-1,
state in DIR/p0 ... DIR/pN-1, each on its own free 127.0.0.1 port, all
sharing one object store) and one router on --listen, which is the address
it prints as ready. Partition K (K >= 1) is mounted at /pK; the rest of
the namespace is partition 0's.`,
		Example: "  canopy up --dir /tmp/canopy\n  canopy up --dir /tmp/canopy --listen 127.0.0.1:0\n" +
			"  canopy up --dir /tmp/fed --partitions 3\n" +
			"  canopy up --dir /tmp/canopy --storage 's3://bucket/canopy?endpoint=http://127.0.0.1:9000'",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tlsCfg, err := serverTLS(tlsCert, tlsKey)
			if err != nil {
				return err
			}
			storeURL, err := st.resolve(dir)
			if err != nil {
				return err
			}
			if partitions != 1 {
				return upPartitions(cmd, g, dir, listen, metricsListen, tlsCfg, partitions, lockTimeout, &st, storeURL)
			}
			cfg := server.Config{Dir: filepath.Join(dir, "meta"), Secret: g.secret, TLS: tlsCfg, Storage: publicURL(storeURL),
				LockTimeout: lockTimeout}
			return serve(cmd, cfg, listen, metricsListen, "ready at", &st, storeURL)
		},
	}
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus metrics, pprof and a status page on this address")
	addServerTLSFlags(cmd, &tlsCert, &tlsKey)
	cmd.Flags().StringVar(&dir, "dir", "canopy-data", "directory that holds the file system's state")
	st.bind(cmd, "default: DIR/objects")
	cmd.Flags().StringVar(&listen, "listen", DefaultAddr, "address to serve on (port 0 picks a free one)")
	cmd.Flags().IntVar(&partitions, "partitions", 1, "metadata partitions to run, behind one router when more than 1")
	addLockTimeoutFlag(cmd, &lockTimeout)
	return cmd
}

func newMetaCmd(g *globals) *cobra.Command {
	var dir, listen, metricsListen, tlsCert, tlsKey string
	var partition uint16
	var lockTimeout time.Duration
	var st storageFlags
	cmd := &cobra.Command{
		Use:     "meta",
		Short:   "Run a metadata server for one partition",
		Example: "  canopy meta --dir /var/lib/canopy/meta0 --listen 10.0.0.5:9400 --partition 0",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tlsCfg, err := serverTLS(tlsCert, tlsKey)
			if err != nil {
				return err
			}
			storeURL, err := st.resolve("")
			if err != nil {
				return err
			}
			cfg := server.Config{Dir: dir, Partition: partition, Secret: g.secret, TLS: tlsCfg, Storage: publicURL(storeURL),
				LockTimeout: lockTimeout}
			return serve(cmd, cfg, listen, metricsListen, fmt.Sprintf("meta partition %d ready at", partition), &st, storeURL)
		},
	}
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus metrics, pprof and a status page on this address")
	addServerTLSFlags(cmd, &tlsCert, &tlsKey)
	cmd.Flags().StringVar(&dir, "dir", "", "directory that holds the partition's log and checkpoints")
	cmd.Flags().StringVar(&listen, "listen", DefaultAddr, "address to serve on (port 0 picks a free one)")
	cmd.Flags().Uint16Var(&partition, "partition", 0, "partition id this server owns")
	st.bind(cmd, "default: none, files hold no data")
	addLockTimeoutFlag(cmd, &lockTimeout)
	cmd.MarkFlagRequired("dir")
	return cmd
}

// addLockTimeoutFlag adds --lock-timeout, how long a client holding file
// locks may stay silent before the server releases them.
func addLockTimeoutFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "lock-timeout", server.DefaultLockTimeout,
		"a client holding file locks that the server does not hear from for this long loses them")
}

// serverGCPercent is the collector's target for a metadata server (the
// GOGC environment variable overrides it): live heap plus a quarter.
const serverGCPercent = 25

// setServerGC sets the collector's target for a process that runs
// metadata servers, unless GOGC says otherwise. The namespace is mostly
// blocks the collector never scans, so collecting often is cheap, and
// memory freed comes back sooner.
func setServerGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
	}
}

// serve opens a metadata server, starts the collector of its object store
// (storeURL, if any), prints the ready line, and runs until a signal
// (graceful shutdown) or a log failure.
func serve(cmd *cobra.Command, cfg server.Config, listen, metricsListen, ready string, st *storageFlags, storeURL string) error {
	cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	cfg.ReleaseMemory = true
	setServerGC()
	var reg *prometheus.Registry
	if metricsListen != "" {
		reg = observe.NewRegistry()
		cfg.Metrics = reg
	}
	srv, err := server.Open(cfg)
	if err != nil {
		return err
	}
	if reg != nil {
		obs, err := observe.Serve(metricsListen, reg, func() any { return srv.Status() }, cfg.Logger)
		if err != nil {
			srv.Close()
			return err
		}
		defer obs.Close()
		cfg.Logger.Info("metrics", "addr", obs.Addr().String())
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		srv.Close()
		return fmt.Errorf("listen %s: %w", listen, err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	stopGC, err := st.startCollector(storeURL, ln.Addr().String(), cfg.Secret, cfg.TLS != nil, cfg.Partition, cfg.Logger)
	if err != nil {
		srv.Close()
		return err
	}
	defer stopGC()
	fmt.Fprintf(cmd.OutOrStdout(), "canopy: %s %s\n", ready, ln.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		cfg.Logger.Info("shutting down", "signal", s.String())
		stopGC()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(ctx)
	case <-srv.Failed():
		srv.Close()
		return server.ErrFailed
	case err := <-serveErr:
		srv.Close()
		return err
	}
}
