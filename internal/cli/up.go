package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopyfs/canopy/internal/gctune"
	"github.com/canopyfs/canopy/internal/host"
	"github.com/canopyfs/canopy/internal/observe"
	"github.com/canopyfs/canopy/internal/server"
)

func newUpCmd(g *globals) *cobra.Command {
	var dir, listen, metricsListen, tlsCert, tlsKey string
	var af accessFlags
	var partitions, replicas int
	var lockTimeout, raftTick time.Duration
	var trashDays int
	var st storageFlags
	var gws upGateways
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
the namespace is partition 0's.

With --s3 ADDR and --webdav ADDR it also serves the namespace as an S3
service and over WebDAV, as canopy gateway s3 and webdav do; their ready
lines follow the server's.

With --replicas R (R > 1) every partition is a Raft group of R replicas,
each with its own directory (DIR/meta/rI, or DIR/pK/rI with partitions),
log and ports, all in this process, behind a router on --listen whose
routing table lists each group's replicas.`,
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
			if _, err := checkExposure(listen, tlsCfg, af.insecure); err != nil {
				return err
			}
			gateways := func(addr string, log *slog.Logger) (func(), error) { return gws.start(cmd, g, addr, log) }
			if replicas > 1 {
				return upReplicated(cmd, g, dir, listen, metricsListen, tlsCfg, partitions, replicas, lockTimeout, raftTick,
					trashDays, &st, storeURL, gateways)
			}
			if partitions != 1 {
				return upPartitions(cmd, g, dir, listen, metricsListen, tlsCfg, partitions, lockTimeout, trashDays, &st, storeURL, gateways)
			}
			cfg := server.Config{Dir: filepath.Join(dir, "meta"), Secret: g.secret, TLS: tlsCfg, Storage: publicURL(storeURL),
				LockTimeout: lockTimeout, AuditLog: af.auditLog, TrashDays: trashDays}
			return serve(cmd, cfg, listen, metricsListen, "ready at", &st, storeURL, &af, gateways)
		},
	}
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus metrics, pprof and a status page on this address")
	addServerTLSFlags(cmd, &tlsCert, &tlsKey)
	cmd.Flags().StringVar(&dir, "dir", "canopy-data", "directory that holds the file system's state")
	st.bind(cmd, "default: DIR/objects")
	cmd.Flags().StringVar(&listen, "listen", DefaultAddr, "address to serve on (port 0 picks a free one)")
	cmd.Flags().IntVar(&partitions, "partitions", 1, "metadata partitions to run, behind one router when more than 1")
	cmd.Flags().IntVar(&replicas, "replicas", 1, "replicas of each partition (a Raft group when more than 1), behind one router")
	cmd.Flags().DurationVar(&raftTick, "raft-tick", 50*time.Millisecond, "Raft's clock with --replicas: a leader is suspected after 10 to 20 ticks of silence")
	addLockTimeoutFlag(cmd, &lockTimeout)
	addTrashDaysFlag(cmd, &trashDays)
	af.bind(cmd)
	gws.bind(cmd)
	return cmd
}

func newMetaCmd(g *globals) *cobra.Command {
	var dir, listen, metricsListen, tlsCert, tlsKey string
	var af accessFlags
	var partition uint16
	var lockTimeout, raftTick time.Duration
	var trashDays int
	var peers, raftPeers string
	var replica uint64
	var join, readIndex bool
	var st storageFlags
	cmd := &cobra.Command{
		Use:   "meta",
		Short: "Run a metadata server for one partition, or one replica of it",
		Long: `Run a metadata server for one partition. With --peers, run one replica of
the partition's Raft group instead: the same command on each replica's
host, with the same --peers; the first start bootstraps the group. A
replica that is not the leader answers calls NOT_LEADER with the leader's
address, which clients and routers follow. Replicas talk to each other
on their client port + 1000 unless --raft-peers says otherwise.`,
		Example: "  canopy meta --dir /var/lib/canopy/meta0 --listen 10.0.0.5:9400 --partition 0\n" +
			"  canopy meta --dir /var/lib/canopy/p0 --listen 10.0.0.5:9400 --partition 0 \\\n" +
			"      --peers 10.0.0.5:9400,10.0.0.6:9400,10.0.0.7:9400",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tlsCfg, err := serverTLS(tlsCert, tlsKey)
			if err != nil {
				return err
			}
			storeURL, err := st.resolve("")
			if err != nil {
				return err
			}
			if _, err := checkExposure(listen, tlsCfg, af.insecure); err != nil {
				return err
			}
			cfg := server.Config{Dir: dir, Partition: partition, Secret: g.secret, TLS: tlsCfg, Storage: publicURL(storeURL),
				LockTimeout: lockTimeout, AuditLog: af.auditLog, TrashDays: trashDays}
			if peers != "" {
				if cfg.Peers, err = groupPeers(peers, raftPeers); err != nil {
					return err
				}
				if cfg.ReplicaID, err = replicaID(cfg.Peers, listen, replica); err != nil {
					return err
				}
				cfg.RaftTick = raftTick
				cfg.RaftJoin = join
				cfg.RaftReadIndex = readIndex
				if !cmd.Flags().Changed("listen") {
					listen = cfg.Peers[cfg.ReplicaID-1].Addr
				}
			}
			return serve(cmd, cfg, listen, metricsListen, fmt.Sprintf("meta partition %d ready at", partition), &st, storeURL, &af, nil)
		},
	}
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus metrics, pprof and a status page on this address")
	addServerTLSFlags(cmd, &tlsCert, &tlsKey)
	cmd.Flags().StringVar(&dir, "dir", "", "directory that holds the partition's log and checkpoints")
	cmd.Flags().StringVar(&listen, "listen", DefaultAddr, "address to serve on (port 0 picks a free one)")
	cmd.Flags().Uint16Var(&partition, "partition", 0, "partition id this server owns")
	st.bind(cmd, "default: none, files hold no data")
	addLockTimeoutFlag(cmd, &lockTimeout)
	addTrashDaysFlag(cmd, &trashDays)
	af.bind(cmd)
	addReplicaFlags(cmd, &peers, &raftPeers, &replica, &raftTick)
	cmd.Flags().BoolVar(&readIndex, "read-index", false, "confirm every batch of reads with a ReadIndex round instead of "+
		"serving them under the leader's lease (leases assume bounded clock drift between replicas)")
	cmd.Flags().BoolVar(&join, "join", false, "an empty replica that waits to be added to its group (canopy group add) instead of bootstrapping one")
	cmd.MarkFlagRequired("dir")
	return cmd
}

// addLockTimeoutFlag adds --lock-timeout, how long a client holding file
// locks may stay silent before the server releases them.
func addLockTimeoutFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "lock-timeout", server.DefaultLockTimeout,
		"a client holding file locks that the server does not hear from for this long loses them")
}

// addTrashDaysFlag adds --trash-days, how long each partition's trash
// keeps what removals free (0: free at once).
func addTrashDaysFlag(cmd *cobra.Command, d *int) {
	cmd.Flags().IntVar(d, "trash-days", 1,
		"keep removed files and trees in /.trash for this many days (0: free them at once); the same on every replica")
}

// serverGC is the collector's target for a metadata server (the GOGC
// environment variable overrides it): live heap plus a quarter, or plus
// 64 MiB while that is more.
var serverGC = gctune.Policy{Percent: 25, Floor: 64 << 20}

// setServerGC sets the collector's target for a process that runs
// metadata servers, unless GOGC says otherwise. The namespace is mostly
// blocks the collector never scans, so collecting often is cheap, and
// memory freed comes back sooner; the floor keeps a small namespace from
// being collected every few megabytes of calls.
func setServerGC() {
	if os.Getenv("GOGC") == "" {
		gctune.Start(serverGC)
	}
}

// serve opens a metadata server, starts the collector of its object store
// (storeURL, if any), prints the ready line, and runs until a signal
// (graceful shutdown) or a log failure. The root partition's server gets
// its local admin credential first (bootstrapAdmin); beyond loopback, or
// with --require-token, clients must then present a token. After the
// ready line, gateways (if not nil) starts what else serves through the
// server at its address.
func serve(cmd *cobra.Command, cfg server.Config, listen, metricsListen, ready string, st *storageFlags, storeURL string,
	af *accessFlags, gateways func(addr string, log *slog.Logger) (func(), error)) error {
	cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	cfg.ReleaseMemory = true
	setServerGC()
	var reg *prometheus.Registry
	if metricsListen != "" {
		reg = observe.NewRegistry()
		cfg.Metrics = reg
	}
	hosted, err := openHost(cfg, listen, func(p uint16, addr string) func() {
		// The object store jobs of each hosted partition, as of the process's own.
		stop, err := st.startStoreJobs(storeURL, addr, cfg.Secret, "", cfg.TLS != nil, p, nil, cfg.Logger.With("partition", p))
		if err != nil {
			cfg.Logger.Warn("no object store jobs for a hosted partition", "partition", p, "err", err)
			return func() {}
		}
		return stop
	})
	if err != nil {
		return err
	}
	defer hosted.Close()
	cfg.Hosting = hosted
	srv, err := server.Open(cfg)
	if err != nil {
		return err
	}
	var adminToken string // the collector's
	if cfg.Partition == 0 {
		// A replica joining a group is not a member yet, and cannot make
		// the admin credential (a mutation) before it is: the group has it.
		if !cfg.RaftJoin {
			if err := bootstrapAdmin(srv, &cfg, cfg.Dir); err != nil {
				srv.Close()
				return err
			}
		}
		data, err := os.ReadFile(filepath.Join(cfg.Dir, AdminTokenFile))
		if err != nil && !cfg.RaftJoin {
			srv.Close()
			return err
		}
		adminToken = strings.TrimSpace(string(data))
		// Only the root partition keeps credentials; the others, which
		// could check none, rely on the shared secret and TLS.
		if af.requireToken || !loopback(listen) {
			srv.RequireTokens()
		}
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
	hosted.SetHomeAddr(ln.Addr().String())
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	stopGC, err := st.startStoreJobs(storeURL, ln.Addr().String(), cfg.Secret, adminToken, cfg.TLS != nil, cfg.Partition, nil, cfg.Logger)
	if err != nil {
		srv.Close()
		return err
	}
	defer stopGC()
	stopBackups, err := st.backup.start(storeURL, ln.Addr().String(), cfg.Secret, cfg.TLS != nil, cfg.Partition, cfg.Logger)
	if err != nil {
		srv.Close()
		return err
	}
	defer stopBackups()
	fmt.Fprintf(cmd.OutOrStdout(), "canopy: %s %s\n", ready, ln.Addr())
	stopGateways := func() {}
	if gateways != nil {
		stop, err := gateways(ln.Addr().String(), cfg.Logger)
		if err != nil {
			srv.Close()
			return err
		}
		stopGateways = sync.OnceFunc(stop)
		defer stopGateways()
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		cfg.Logger.Info("shutting down", "signal", s.String())
		stopGateways()
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

// openHost starts what the process hosts beside its own partition, in
// DIR/hosted, listening on the host of listen (loopback when that is
// unspecified: give --listen a host for replicas others can reach), and
// calls onStart for each replica once it serves.
func openHost(cfg server.Config, listen string, onStart func(uint16, string) func()) (*host.Host, error) {
	listenHost, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(listenHost); listenHost == "" || ip != nil && ip.IsUnspecified() {
		listenHost = "127.0.0.1"
	}
	base := cfg
	base.AuditLog = "" // the process's own partition's
	return host.Open(host.Config{Dir: filepath.Join(cfg.Dir, "hosted"), Home: cfg.Partition, ListenHost: listenHost,
		Base: base, OnStart: onStart})
}
