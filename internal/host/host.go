// Package host runs, inside one metadata server process, replicas of
// partitions other than the one the process was started for. A virtual
// partition moves between groups of processes by Raft membership changes
// (docs/rebalance.md): the processes of the group it goes to are asked
// to run a replica of it (HOST_START), which joins its Raft group, and
// those of the group it leaves stop theirs (HOST_STOP) once removed.
//
// Each hosted replica has a directory of its own, DIR/p<partition>-r<id>,
// with the replica's Raft log and snapshots and a spec.json that records
// its id and its two addresses, and listens on two ports of its own,
// picked when it starts and kept across restarts: Open starts every
// replica it finds again, on the same ports.
package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/server"
)

// Config is how a Host runs its replicas.
type Config struct {
	// Dir holds one directory per hosted replica.
	Dir string
	// Home is the partition the process was started for; it is not hosted.
	Home uint16
	// HomeAddr is where the process serves Home: the address to stop a
	// hosted replica at (HOST_STOP sent to the replica itself would lose
	// its answer with the listener it stops).
	HomeAddr string
	// ListenHost is the host part of the replicas' listeners (their ports
	// are picked by the system).
	ListenHost string
	// OnStart, if set, is called once a replica serves at addr (the
	// process's object store jobs for its partition, for one); what it
	// returns is called when the replica stops.
	OnStart func(partition uint16, addr string) (stop func())
	// Base is the configuration every hosted replica starts from: secret,
	// TLS, object store, lock timeout, trash, Raft clock, logger. Its Dir,
	// Partition, Peers, ReplicaID, RaftJoin, RaftListener and Hosting are
	// set per replica.
	Base server.Config
}

// spec is what a hosted replica's spec.json records.
type spec struct {
	Partition uint16        `json:"partition"`
	ID        uint64        `json:"id"`
	Addr      string        `json:"addr"`
	RaftAddr  string        `json:"raft_addr"`
	Others    []server.Peer `json:"others"` // the group's other replicas when it started
	Join      bool          `json:"join"`
}

const specFile = "spec.json"

// replica is one hosted replica, running.
type replica struct {
	spec spec
	dir  string
	srv  *server.Server
	stop func() // what OnStart returned
}

// Host runs the hosted replicas of one process. Its methods are safe for
// concurrent use; mu is held while a replica starts or stops, so that two
// calls for one partition never race.
type Host struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	replicas map[uint16]*replica // by partition
	closed   bool
}

// Open makes Dir if needed and starts every replica found in it. A
// replica that fails to start is logged and left on disk.
func Open(cfg Config) (*Host, error) {
	if cfg.ListenHost == "" {
		cfg.ListenHost = "127.0.0.1"
	}
	log := cfg.Base.Logger
	if log == nil {
		log = slog.Default()
	}
	h := &Host{cfg: cfg, log: log.With("role", "host"), replicas: make(map[uint16]*replica)}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", cfg.Dir, err)
	}
	names, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", cfg.Dir, err)
	}
	for _, n := range names {
		dir := filepath.Join(cfg.Dir, n.Name())
		data, err := os.ReadFile(filepath.Join(dir, specFile))
		if err != nil {
			h.log.Warn("hosted replica without a spec left alone", "dir", dir, "err", err)
			continue
		}
		var sp spec
		if err := json.Unmarshal(data, &sp); err != nil {
			h.log.Warn("hosted replica with a bad spec left alone", "dir", dir, "err", err)
			continue
		}
		if err := h.run(sp, dir, false); err != nil {
			h.log.Error("hosted replica did not start", "partition", sp.Partition, "replica", sp.ID, "err", err)
		}
	}
	return h, nil
}

// replicaDir is where replica id of partition p lives.
func (h *Host) replicaDir(p uint16, id uint64) string {
	return filepath.Join(h.cfg.Dir, fmt.Sprintf("p%d-r%d", p, id))
}

// StartReplica runs replica req.Id of partition req.Partition here, or
// answers the one already running.
func (h *Host) StartReplica(req *pb.HostStartRequest) (*pb.HostReplica, error) {
	if req.Partition > 1<<protocol.PartitionBits-1 {
		return nil, fmt.Errorf("%w: partition %d", syscall.EINVAL, req.Partition)
	}
	p := uint16(req.Partition)
	if p == h.cfg.Home {
		return nil, fmt.Errorf("%w: partition %d is this process's own", syscall.EINVAL, p)
	}
	if req.Id == 0 {
		return nil, fmt.Errorf("%w: replica id 0", syscall.EINVAL)
	}
	others := make([]server.Peer, 0, len(req.Others))
	for _, o := range req.Others {
		if o.Id == 0 || o.Id == req.Id || o.Addr == "" || o.RaftAddr == "" ||
			slices.ContainsFunc(others, func(q server.Peer) bool { return q.ID == o.Id }) {
			return nil, fmt.Errorf("%w: replica %d with addresses %q, %q among the others of %d", syscall.EINVAL,
				o.Id, o.Addr, o.RaftAddr, req.Id)
		}
		others = append(others, server.Peer{ID: o.Id, Addr: o.Addr, RaftAddr: o.RaftAddr})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("host closed: %w", syscall.ESHUTDOWN)
	}
	if r := h.replicas[p]; r != nil {
		if r.spec.ID != req.Id {
			return nil, fmt.Errorf("%w: this process runs replica %d of partition %d", syscall.EEXIST, r.spec.ID, p)
		}
		return r.spec.reply(), nil
	}
	sp := spec{Partition: p, ID: req.Id, Others: others, Join: req.Join}
	dir := h.replicaDir(p, req.Id)
	if err := os.RemoveAll(dir); err != nil { // what a start that failed midway left
		return nil, fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := h.runLocked(sp, dir, true); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return h.replicas[p].spec.reply(), nil
}

func (sp *spec) reply() *pb.HostReplica {
	return &pb.HostReplica{Partition: uint32(sp.Partition), Id: sp.ID, Addr: sp.Addr, RaftAddr: sp.RaftAddr}
}

// run is runLocked under mu.
func (h *Host) run(sp spec, dir string, fresh bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runLocked(sp, dir, fresh)
}

// runLocked listens on the replica's two addresses (new ones, for a fresh
// replica, which records them in its spec first), opens its server and
// serves it.
func (h *Host) runLocked(sp spec, dir string, fresh bool) error {
	addr, raftAddr := sp.Addr, sp.RaftAddr
	if fresh {
		addr = net.JoinHostPort(h.cfg.ListenHost, "0")
		raftAddr = addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("partition %d replica %d: listen %s: %w", sp.Partition, sp.ID, addr, err)
	}
	rln, err := net.Listen("tcp", raftAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("partition %d replica %d: listen %s: %w", sp.Partition, sp.ID, raftAddr, err)
	}
	if fresh {
		sp.Addr, sp.RaftAddr = ln.Addr().String(), rln.Addr().String()
		if err := writeSpec(dir, sp); err != nil {
			ln.Close()
			rln.Close()
			return err
		}
	}
	cfg := h.cfg.Base
	cfg.Dir, cfg.Partition, cfg.ReplicaID, cfg.RaftJoin = dir, sp.Partition, sp.ID, sp.Join
	cfg.Peers = append(slices.Clone(sp.Others), server.Peer{ID: sp.ID, Addr: sp.Addr, RaftAddr: sp.RaftAddr})
	slices.SortFunc(cfg.Peers, func(a, b server.Peer) int { return cmp.Compare(a.ID, b.ID) })
	cfg.RaftListener, cfg.Hosting = rln, h
	cfg.Logger = h.log
	cfg.Metrics = nil // the process's registry holds its own partition's
	srv, err := server.Open(cfg)
	if err != nil {
		ln.Close()
		rln.Close()
		return fmt.Errorf("partition %d replica %d: %w", sp.Partition, sp.ID, err)
	}
	go srv.Serve(ln)
	go func() {
		<-srv.Failed()
		h.log.Error("hosted replica failed", "partition", sp.Partition, "replica", sp.ID)
	}()
	stop := func() {}
	if h.cfg.OnStart != nil {
		stop = h.cfg.OnStart(sp.Partition, sp.Addr)
	}
	h.replicas[sp.Partition] = &replica{spec: sp, dir: dir, srv: srv, stop: stop}
	h.log.Info("hosted replica serving", "partition", sp.Partition, "replica", sp.ID, "addr", sp.Addr,
		"raft", sp.RaftAddr, "join", sp.Join)
	return nil
}

// writeSpec writes sp into dir durably.
func writeSpec(dir string, sp spec) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	data, err := json.MarshalIndent(sp, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, specFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, specFile))
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, specFile), err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// StopReplica stops the replica of req.Partition run here and removes its
// directory. It is meant for a replica already removed from its group:
// its state is gone with it. A replica not run here is ENOENT.
func (h *Host) StopReplica(req *pb.HostStopRequest) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.replicas[uint16(req.Partition)]
	if req.Partition > 1<<protocol.PartitionBits-1 || r == nil || r.spec.ID != req.Id {
		return fmt.Errorf("%w: no replica %d of partition %d here", syscall.ENOENT, req.Id, req.Partition)
	}
	delete(h.replicas, r.spec.Partition)
	h.shutdown(r)
	if err := os.RemoveAll(r.dir); err != nil {
		return fmt.Errorf("remove %s: %w", r.dir, err)
	}
	h.log.Info("hosted replica stopped and removed", "partition", r.spec.Partition, "replica", r.spec.ID)
	return nil
}

func (h *Host) shutdown(r *replica) {
	r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil && !errors.Is(err, server.ErrFailed) {
		h.log.Warn("hosted replica shutdown", "partition", r.spec.Partition, "replica", r.spec.ID, "err", err)
	}
}

// SetHomeAddr records where the process serves its own partition, once
// it listens (its --listen may have asked for any port).
func (h *Host) SetHomeAddr(addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cfg.HomeAddr = addr
}

// ListReplicas answers HOST_LIST.
func (h *Host) ListReplicas() *pb.HostListReply {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := &pb.HostListReply{Home: uint32(h.cfg.Home), HomeAddr: h.cfg.HomeAddr}
	for _, r := range h.replicas {
		out.Replicas = append(out.Replicas, r.spec.reply())
	}
	slices.SortFunc(out.Replicas, func(a, b *pb.HostReplica) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}

// Close shuts every hosted replica down, keeping their directories.
func (h *Host) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for p, r := range h.replicas {
		h.shutdown(r)
		delete(h.replicas, p)
	}
}
