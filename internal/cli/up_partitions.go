package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/mount"
	"github.com/canopyfs/canopy/internal/observe"
	"github.com/canopyfs/canopy/internal/router"
	"github.com/canopyfs/canopy/internal/server"
)

// `canopy up --partitions N` (N > 1) runs a federated Canopy in one
// process: N metadata partitions, with ids 0..N-1, each keeping its state
// in DIR/pK and serving on its own free 127.0.0.1 port, and one router in
// front of them on --listen. At every start the routing table (kept by
// partition 0) is pointed at the partitions' current ports. On the first
// start the mount table gets "/pK" -> partition K, target "/", for every
// K >= 1, so that each partition owns part of the namespace: "/" and all
// else stays in partition 0. Later edits to the mount table are kept.
// Each partition takes its own metadata backups (--backup-interval), under
// meta-backup/pK/ in the shared object store.

// partitionMount is the prefix mounted from partition k's root.
func partitionMount(k int) string { return fmt.Sprintf("/p%d", k) }

// upPartitions runs n partitions and a router until a signal or a
// partition's log fails.
func upPartitions(cmd *cobra.Command, g *globals, dir, listen, metricsListen string, tlsCfg *tls.Config, n int, lockTimeout time.Duration,
	trashDays int, st *storageFlags, storeURL string, gateways func(string, *slog.Logger) (func(), error)) error {
	if n < 2 || n > mount.VirtualPartitions {
		return fmt.Errorf("up: --partitions %d: want 1 to %d", n, mount.VirtualPartitions)
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	addrs := make([]string, n)
	failed := make(chan error, n)
	for k := range n {
		cfg := server.Config{Dir: filepath.Join(dir, fmt.Sprintf("p%d", k)), Partition: uint16(k), Secret: g.secret,
			Logger: log.With("partition", k), Storage: publicURL(storeURL), LockTimeout: lockTimeout,
			TrashDays: trashDays}
		srv, addr, stop, err := startPartition(cfg, metricsListen != "", hostedJobs(st, storeURL, g.secret, cfg.Logger))
		if err != nil {
			return err
		}
		defer stop()
		addrs[k] = addr
		stopBackups, err := st.backup.start(storeURL, addr, g.secret, false, cfg.Partition, cfg.Logger)
		if err != nil {
			return err
		}
		defer stopBackups()
		go func() {
			<-srv.Failed()
			failed <- fmt.Errorf("partition %d: %w", k, server.ErrFailed)
		}()
	}
	if err := layoutTables(g, addrs); err != nil {
		return err
	}
	for k, addr := range addrs {
		stopGC, err := st.startStoreJobs(storeURL, addr, g.secret, "", false, uint16(k), peersOf(k, addrs), log.With("partition", k))
		if err != nil {
			return err
		}
		defer stopGC()
	}
	cfg := router.Config{Listen: listen, Root: addrs[:1], Secret: g.secret, TLS: tlsCfg, Logger: log.With("role", "router")}
	return runRouter(cmd, cfg, metricsListen, "ready at", failed, gateways)
}

// peersOf returns the addresses of every partition but k, by partition.
func peersOf(k int, addrs []string) map[uint16]string {
	peers := make(map[uint16]string, len(addrs)-1)
	for j, a := range addrs {
		if j != k {
			peers[uint16(j)] = a
		}
	}
	return peers
}

// startPartition opens and serves one partition on a free loopback port,
// with its own metrics endpoint (also on a free port, logged) if metrics
// are asked for. stop shuts it down gracefully.
func startPartition(cfg server.Config, metrics bool, jobs func(uint16, string) func()) (*server.Server, string, func(), error) {
	return startPartitionOn(cfg, "127.0.0.1:0", metrics, jobs)
}

// hostedJobs returns what starts the object store jobs of a partition a
// process hosts (internal/host), as of its own.
func hostedJobs(st *storageFlags, storeURL, secret string, log *slog.Logger) func(uint16, string) func() {
	return func(p uint16, addr string) func() {
		stop, err := st.startStoreJobs(storeURL, addr, secret, "", false, p, nil, log.With("hosted", p))
		if err != nil {
			log.Warn("no object store jobs for a hosted partition", "hosted", p, "err", err)
			return func() {}
		}
		return stop
	}
}

// startPartitionOn is startPartition on the address listen.
func startPartitionOn(cfg server.Config, listen string, metrics bool, jobs func(uint16, string) func()) (*server.Server, string, func(), error) {
	obsReg := observe.NewRegistry()
	if metrics {
		cfg.Metrics = obsReg
	}
	cfg.ReleaseMemory = true
	setServerGC()
	// Each partition (each replica) hosts the virtual partitions moved to
	// its group, as a `canopy meta` process does.
	hosted, err := openHost(cfg, listen, jobs)
	if err != nil {
		return nil, "", nil, err
	}
	cfg.Hosting = hosted
	srv, err := server.Open(cfg)
	if err != nil {
		hosted.Close()
		return nil, "", nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		srv.Close()
		hosted.Close()
		return nil, "", nil, fmt.Errorf("listen: %w", err)
	}
	hosted.SetHomeAddr(ln.Addr().String())
	go srv.Serve(ln)
	var obs *observe.Server
	if metrics {
		if obs, err = observe.Serve("127.0.0.1:0", obsReg, func() any { return srv.Status() }, cfg.Logger); err != nil {
			srv.Close()
			return nil, "", nil, err
		}
		cfg.Logger.Info("metrics", "addr", obs.Addr().String())
	}
	cfg.Logger.Info("partition serving", "addr", ln.Addr().String(), "dir", cfg.Dir)
	stop := func() {
		if obs != nil {
			obs.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			cfg.Logger.Warn("shutdown", "err", err)
		}
		hosted.Close()
	}
	return srv, ln.Addr().String(), stop, nil
}

// layoutTables points the routing table at the partitions' addresses and,
// on the first start (tables at version 0), mounts each partition K >= 1 at
// /pK.
func layoutTables(g *globals, addrs []string) error {
	groups := make([][]string, len(addrs))
	for k, a := range addrs {
		groups[k] = []string{a}
	}
	return layoutGroupTables(g, groups)
}

// layoutGroupTables is layoutTables for partitions served by groups of
// replicas: each route lists its group's replica addresses.
func layoutGroupTables(g *globals, groups [][]string) error {
	opts, err := g.clientOptions()
	if err != nil {
		return err
	}
	opts.TLS = nil // the partitions serve plain TCP on loopback
	c, err := client.Dial(strings.Join(groups[0], ","), opts)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t, err := c.Tables(ctx)
	if err != nil {
		return err
	}
	u := client.TablesUpdate{ExpectedVersion: t.Version}
	for k, addrs := range groups {
		u.SetRoutes = append(u.SetRoutes, client.Route{VPart: uint16(k), Addrs: addrs})
	}
	if t.Version == 0 {
		for k := 1; k < len(groups); k++ {
			u.SetMounts = append(u.SetMounts, client.MountEntry{Prefix: partitionMount(k), VPart: uint16(k), Target: "/"})
		}
	}
	if _, err := c.UpdateTables(ctx, u); err != nil {
		return fmt.Errorf("up: set the tables: %w", unwrapPath(err))
	}
	return nil
}
