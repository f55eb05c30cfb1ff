package server

// The one-way upgrade of a single-replica partition to a replicated one:
// `canopy meta --dir DIR --peers SELF` on a directory that a
// single-replica `canopy meta` wrote. The partition is recovered as the
// single server recovers it (its newest checkpoint, then its log, then
// the restart record that ends every session), and that state becomes
// the first snapshot of a group of one voter, in DIR/raft; the
// single-replica log and checkpoints are then moved into DIR/pre-raft,
// where nothing reads them again. More replicas are added as to any
// group: started on empty directories with --join, then GROUP_ADD.

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/canopyfs/canopy/internal/replica"
)

// preRaftDir is where an upgraded partition's single-replica files go,
// under its directory.
const preRaftDir = "pre-raft"

// upgradeIndex is the Raft index of an upgraded partition's first
// snapshot.
const upgradeIndex = 1

// errUpgradeGroup refuses to upgrade a partition straight into a group of
// several replicas: the others would start their own, empty, history.
var errUpgradeGroup = errors.New("a single-replica partition is upgraded as a group of one replica")

// singleFiles lists the single-replica log segments and checkpoints in
// dir (other files, such as the local admin token or an audit log, may
// sit beside a replica's raft/).
func singleFiles(cfg *Config) ([]string, error) {
	names, err := cfg.FS.ReadDir(cfg.Dir)
	if err != nil {
		return nil, nil // not there yet: created by the caller
	}
	var out []string
	for _, name := range names {
		log := strings.HasPrefix(name, "log-") && strings.HasSuffix(name, ".wal")
		ckpt := strings.HasPrefix(name, "checkpoint-") && (strings.HasSuffix(name, ".ckpt") || strings.Contains(name, ".ckpt."))
		if log || ckpt {
			out = append(out, name)
		}
	}
	return out, nil
}

// upgradeSingle upgrades the single-replica partition in cfg.Dir, if it
// holds one, into the replica directory dir of a group whose voters are
// ids, once: a directory upgraded already (dir holds a snapshot) only has
// its leftover single-replica files moved away, which a crash after the
// snapshot was written may have left.
func upgradeSingle(cfg *Config, dir string, ids []uint64) error {
	files, err := singleFiles(cfg)
	if err != nil || len(files) == 0 {
		return err
	}
	seeded, err := replica.Seeded(cfg.FS, dir)
	if err != nil {
		return err
	}
	if !seeded {
		if cfg.RaftJoin || len(ids) != 1 {
			return fmt.Errorf("%s holds a single-replica partition (%s): %w; start it with --peers naming "+
				"this replica alone, then add the others (started with --join on empty directories) with canopy group add",
				cfg.Dir, files[0], errUpgradeGroup)
		}
		if err := seedFromSingle(cfg, dir, ids); err != nil {
			return fmt.Errorf("upgrade the single-replica partition in %s: %w", cfg.Dir, err)
		}
	}
	return retireSingle(cfg, files)
}

// seedFromSingle recovers the single-replica partition in cfg.Dir and
// writes its state as the first snapshot of the replica in dir.
func seedFromSingle(cfg *Config, dir string, ids []uint64) error {
	rec, err := recoverState(cfg)
	if err != nil {
		return err
	}
	defer rec.wal.Close()
	nodes := rec.eng.Len()
	// The state's records continue at the Raft index after the snapshot.
	rec.nextLSN = upgradeIndex + 1
	rs := &replicatedState{sm: rec.stateMachine, partition: cfg.Partition, cfg: cfg, members: map[uint64]Peer{}}
	write, release, err := rs.Snapshot()
	if err != nil {
		return err
	}
	defer release()
	if err := replica.Seed(cfg.FS, dir, upgradeIndex, ids, write); err != nil {
		return err
	}
	cfg.Logger.Info("single-replica partition upgraded to a replicated one", "dir", cfg.Dir, "nodes", nodes,
		"snapshot_index", upgradeIndex, "kept", filepath.Join(cfg.Dir, preRaftDir))
	return nil
}

// retireSingle moves the single-replica files into cfg.Dir/pre-raft, so
// that the directory is not upgraded again and no single-replica server
// opens it by mistake.
func retireSingle(cfg *Config, files []string) error {
	to := filepath.Join(cfg.Dir, preRaftDir)
	if err := cfg.FS.MkdirAll(to); err != nil {
		return fmt.Errorf("create %s: %w", to, err)
	}
	for _, name := range files {
		if err := cfg.FS.Rename(filepath.Join(cfg.Dir, name), filepath.Join(to, name)); err != nil {
			return fmt.Errorf("move %s to %s: %w", name, to, err)
		}
	}
	if err := cfg.FS.SyncDir(to); err != nil {
		return fmt.Errorf("sync %s: %w", to, err)
	}
	if err := cfg.FS.SyncDir(cfg.Dir); err != nil {
		return fmt.Errorf("sync %s: %w", cfg.Dir, err)
	}
	return nil
}
