package cli

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/internal/mount"
	"github.com/canopyfs/canopy/internal/router"
	"github.com/canopyfs/canopy/internal/server"
)

// Replicated partitions on the command line.
//
// `canopy meta --peers A1,A2,A3` runs one replica of a group: the peers are
// the replicas' client addresses, the same list in the same order on every
// replica; a replica's id is its place in the list (1, 2, 3) and it is the
// entry equal to --listen unless --replica says otherwise. Each replica
// talks to the others on its Raft address: its client port + 1000 on the
// same host, unless --raft-peers lists the Raft addresses (same order).
//
// `canopy up --replicas R` runs every replica of every partition in this
// process, each with its own directory (DIR/meta/rI for one partition,
// DIR/pK/rI for more), log and ports, and a router in front of them.

// groupPeers builds the group's peers from --peers and --raft-peers.
func groupPeers(peers, raftPeers string) ([]server.Peer, error) {
	addrs := splitList(peers)
	raft := splitList(raftPeers)
	if len(raft) > 0 && len(raft) != len(addrs) {
		return nil, fmt.Errorf("--raft-peers lists %d addresses, --peers %d", len(raft), len(addrs))
	}
	out := make([]server.Peer, len(addrs))
	for i, a := range addrs {
		p := server.Peer{ID: uint64(i + 1), Addr: a}
		if len(raft) > 0 {
			p.RaftAddr = raft[i]
		} else {
			ra, err := server.RaftAddrFor(a)
			if err != nil {
				return nil, err
			}
			p.RaftAddr = ra
		}
		out[i] = p
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// replicaID finds this replica among peers: --replica if set (1-based),
// else the entry equal to listen.
func replicaID(peers []server.Peer, listen string, id uint64) (uint64, error) {
	if id != 0 {
		if id > uint64(len(peers)) {
			return 0, fmt.Errorf("--replica %d: the group has %d replicas", id, len(peers))
		}
		return id, nil
	}
	for _, p := range peers {
		if p.Addr == listen {
			return p.ID, nil
		}
	}
	return 0, fmt.Errorf("--listen %s is not among --peers: say which replica this is with --replica", listen)
}

// addReplicaFlags adds the flags of a replicated partition to cmd.
func addReplicaFlags(cmd *cobra.Command, peers, raftPeers *string, id *uint64, tick *time.Duration) {
	cmd.Flags().StringVar(peers, "peers", "", "client addresses of every replica of the partition's group, this one included, "+
		"the same list on each (a replicated partition; none: a single server). A single server's --dir started with "+
		"--peers naming this replica alone is upgraded, once, to a group of one replica (its files kept in DIR/pre-raft)")
	cmd.Flags().StringVar(raftPeers, "raft-peers", "", "the replicas' addresses for Raft traffic, in the order of --peers "+
		"(default: each client port + 1000)")
	cmd.Flags().Uint64Var(id, "replica", 0, "this replica's place in --peers, from 1 (default: the entry equal to --listen)")
	cmd.Flags().DurationVar(tick, "raft-tick", 50*time.Millisecond, "Raft's clock: a leader is suspected after 10 to 20 ticks of silence")
}

// upReplicated runs partitions groups of replicas each, all in this
// process, and a router on listen.
func upReplicated(cmd *cobra.Command, g *globals, dir, listen, metricsListen string, tlsCfg *tls.Config, partitions, replicas int,
	lockTimeout time.Duration, tick time.Duration, trashDays int, st *storageFlags, storeURL string,
	gateways func(string, *slog.Logger) (func(), error)) error {
	if partitions < 1 || partitions > mount.VirtualPartitions {
		return fmt.Errorf("up: --partitions %d: want 1 to %d", partitions, mount.VirtualPartitions)
	}
	if replicas < 1 || replicas > 7 {
		return fmt.Errorf("up: --replicas %d: want 1 to 7", replicas)
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	groups := make([][]string, partitions)
	failed := make(chan error, partitions*replicas)
	for k := range partitions {
		peers := make([]server.Peer, replicas)
		for i := range peers {
			a, err := freeLoopback()
			if err != nil {
				return err
			}
			ra, err := freeLoopback()
			if err != nil {
				return err
			}
			peers[i] = server.Peer{ID: uint64(i + 1), Addr: a, RaftAddr: ra}
			groups[k] = append(groups[k], a)
		}
		pdir := filepath.Join(dir, fmt.Sprintf("p%d", k))
		if partitions == 1 {
			pdir = filepath.Join(dir, "meta")
		}
		for _, p := range peers {
			cfg := server.Config{Dir: filepath.Join(pdir, fmt.Sprintf("r%d", p.ID)), Partition: uint16(k), Secret: g.secret,
				Logger: log.With("partition", k), Storage: publicURL(storeURL), LockTimeout: lockTimeout,
				Peers: peers, ReplicaID: p.ID, RaftTick: tick, TrashDays: trashDays}
			srv, _, stop, err := startPartitionOn(cfg, p.Addr, metricsListen != "", hostedJobs(st, storeURL, g.secret, cfg.Logger))
			if err != nil {
				return err
			}
			defer stop()
			go func() {
				<-srv.Failed()
				failed <- fmt.Errorf("partition %d replica %d: %w", k, p.ID, server.ErrFailed)
			}()
		}
	}
	if err := layoutGroupTables(g, groups); err != nil {
		return err
	}
	joined := make([]string, len(groups))
	for k, addrs := range groups {
		joined[k] = strings.Join(addrs, ",")
	}
	for k := range groups {
		stopGC, err := st.startStoreJobs(storeURL, joined[k], g.secret, "", false, uint16(k), peersOf(k, joined), log.With("partition", k))
		if err != nil {
			return err
		}
		defer stopGC()
	}
	cfg := router.Config{Listen: listen, Root: groups[0], Secret: g.secret, TLS: tlsCfg, Logger: log.With("role", "router")}
	return runRouter(cmd, cfg, metricsListen, "ready at", failed, gateways)
}

// freeLoopback returns a loopback address that was free a moment ago.
func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
