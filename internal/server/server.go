package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/locks"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// Config configures a metadata server.
type Config struct {
	Dir             string                // where the log and checkpoints live
	Partition       uint16                // the partition this server owns
	FS              vfs.FS                // default: the OS
	QueueSize       int                   // operations of each class (read, write) waiting for the apply loop; default 8192
	ReadShare       int                   // of every 10 operations the apply loop takes while both classes wait, how many are reads; default 7
	MaxBatch        int                   // operations applied per batch; default 4096
	RetryCacheSize  int                   // logged calls remembered for retries; default 65536
	RetryCacheTTL   time.Duration         // and for how long, by the records' clock; default 15 min (part of the state: alike on every replica)
	CheckpointEvery int                   // log records between checkpoints; default 1,000,000
	Secret          string                // shared secret clients must present; "" = none
	RequireToken    bool                  // refuse clients that present no credential token (see access.go)
	AuditLog        string                // file the audit log is appended to (audit.go); "" = none
	AuditMaxBytes   int64                 // rotate the audit log at this size; default 64 MiB
	Logger          *slog.Logger          // default slog.Default()
	Clock           func() int64          // nanoseconds since the epoch; default time.Now
	Metrics         prometheus.Registerer // where to register the server's metrics; nil = nowhere
	TLS             *tls.Config           // serve TLS; nil = plain TCP
	TableWatches    int                   // long-polling TABLES_GET calls parked at once; default 1024
	Storage         string                // object store URL that VOLUME tells clients (object.Open), without secrets
	LockTimeout     time.Duration         // a client holding file locks and silent this long loses them; default 10 s
	// EarlySyncPause is the least time between two syncs of the records
	// of calls answered before they were durable (the POSIX durability
	// mode): how much later than its reply such a change may become
	// durable, beyond one sync. Default 2 ms; negative: no pause.
	EarlySyncPause time.Duration
	// TrashDays keeps what removals free in each partition's /.trash for
	// that many days (engine/trash.go, at most engine.MaxTrashDays); 0,
	// the default here, frees at once. `canopy meta` and `canopy up`
	// default to 1. The value is state: a server whose value differs from
	// its state's logs the new one (with its restart record; a group's
	// leader once per term), and replay applies each record with the value
	// logged before it (settings.go).
	TrashDays int

	// The idle sweep packs directories unused for a while (idle.go).
	IdleBudget        int           // work per step (entries packed plus directories visited); default 1000
	IdleRound         time.Duration // pause between rounds of the sweep; default 1s
	CompactEveryBatch bool          // run the sweep to its end after every batch (tests: every operation meets packed directories)

	// ReleaseMemory returns freed memory to the operating system after a
	// checkpoint is written and when the idle sweep has packed what it
	// could, at most every 10 s (memory.go).
	ReleaseMemory bool

	// Peers, when set, makes the partition one replica of a Raft group
	// (replicated.go): every replica of the group, this one included,
	// which ReplicaID names. The same Peers on every replica; the first
	// start of an empty directory bootstraps the group.
	Peers     []Peer
	ReplicaID uint64
	RaftTick  time.Duration // Raft's clock; 0 = 50 ms (a leader is suspected after 10 to 20 ticks)
	// Entries applied between snapshots (a batch entry counts as one per
	// record in it), and kept in the log before one for followers a
	// little behind; 0 = CheckpointEvery and 10000.
	RaftSnapshotEntries, RaftCatchUpEntries uint64
	// RaftJoin starts an empty replica that waits to be added to an
	// existing group (GROUP_ADD) instead of bootstrapping one.
	RaftJoin bool
	// RaftReadIndex makes the leader confirm every batch of reads with a
	// ReadIndex round of heartbeats; by default it answers them under a
	// leader lease while a quorum's last confirmation is recent enough
	// (which assumes bounded clock drift; docs/replication.md).
	RaftReadIndex bool
	// RaftListener, if set, is where the replica hears the others,
	// instead of a listener on its Peer's RaftAddr; the server closes it.
	RaftListener net.Listener
	// Hosting answers the calls that run replicas of other partitions in
	// this process (hosting.go); nil: they are refused with ENOSYS.
	Hosting Hosting
}

func (c *Config) setDefaults() {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 8192
	}
	if c.ReadShare <= 0 || c.ReadShare > 10 {
		c.ReadShare = 7
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 4096
	}
	if c.RetryCacheSize <= 0 {
		c.RetryCacheSize = 65536
	}
	if c.RetryCacheTTL <= 0 {
		c.RetryCacheTTL = 15 * time.Minute
	}
	if c.EarlySyncPause == 0 {
		c.EarlySyncPause = 2 * time.Millisecond
	}
	if c.IdleBudget <= 0 {
		c.IdleBudget = 1000
	}
	if c.IdleRound <= 0 {
		c.IdleRound = time.Second
	}
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = 1_000_000
	}
	if c.RaftSnapshotEntries == 0 {
		// A snapshot encodes the whole namespace: as a single server's
		// checkpoints, one per million records.
		c.RaftSnapshotEntries = uint64(c.CheckpointEvery)
	}
	if c.RaftCatchUpEntries == 0 {
		c.RaftCatchUpEntries = 10_000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = func() int64 { return time.Now().UnixNano() }
	}
}

// ErrFailed reports that the server stopped because its log failed: the
// namespace in memory may hold changes that are not durable, so it serves
// nothing more. Restarting recovers the durable state.
var ErrFailed = errors.New("metadata server failed")

// Server is a running metadata server: the stages of stages.go, wired
// together. The Server itself owns no state a stage uses; it starts the
// stages' goroutines, and stops them in order (stopLoops).
type Server struct {
	cfg Config
	log *slog.Logger
	rpc *rpc.Server

	intake  *intake       // decode and queue, on the RPC readers
	apply   *applier      // the apply loop and the state machine it owns
	commit  *committer    // the committer and the log it owns
	replies *replier      // reply, on the committer's goroutine
	ckpt    *checkpointer // writes checkpoints
	release *releaser     // returns freed memory to the operating system
	repl    *replicated   // the replicated mode's stages, instead of apply, commit, replies, ckpt; nil without peers

	wal   *wal.Log     // the committer's; closed by stopLoops once the committer ended
	watch *tablesWatch // parked TABLES_GET long polls; see dispatch_tables.go
	locks *locks.Table // file locks per client session (internal/locks)
	audit *auditLog    // nil without Config.AuditLog; closed by stopLoops

	reads    chan *op    // intake -> applier: everything but mutations
	writes   chan *op    // intake -> applier: mutations
	ckptBusy atomic.Bool // a checkpoint is being encoded or written

	stats   stats
	metrics *metrics

	stopOnce sync.Once
	stopped  chan struct{} // closed when Close starts
	failed   chan struct{} // closed when the log fails
	failOnce sync.Once
	loops    sync.WaitGroup
}

// Open recovers the partition stored in cfg.Dir (creating an empty one if
// there is none) and starts the apply loop, committer, checkpointer, lock
// sweeper and memory releaser. It does not listen: call Serve.
func Open(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if cfg.TrashDays < 0 || cfg.TrashDays > engine.MaxTrashDays {
		return nil, fmt.Errorf("trash days %d: must be 0 to %d", cfg.TrashDays, engine.MaxTrashDays)
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		reads:   make(chan *op, cfg.QueueSize),
		writes:  make(chan *op, cfg.QueueSize),
		stopped: make(chan struct{}),
		failed:  make(chan struct{}),
		watch:   newTablesWatch(cfg.TableWatches),
		locks:   locks.New(cfg.LockTimeout, nil),
	}
	if len(cfg.Peers) > 0 {
		var err error
		if s.audit, err = openAudit(cfg.AuditLog, cfg.AuditMaxBytes, 0, s.log); err != nil {
			return nil, err
		}
		s.intake = &intake{reads: s.reads, writes: s.writes, failed: s.failed, stopped: s.stopped,
			locks: s.locks, leases: newLeaseTable(), storage: cfg.Storage, log: s.log, group: s.groupReply, hosting: cfg.Hosting}
		if err := openReplicated(s); err != nil {
			return nil, err
		}
		s.rpc = rpc.NewServer(rpc.HandlerFunc(s.intake.serveCall), rpc.ServerConfig{
			Secret: cfg.Secret, TLS: cfg.TLS, Logger: cfg.Logger, Metrics: cfg.Metrics,
			Authenticate: s.intake.access.authenticate, AuthenticateCert: s.intake.access.authenticateCert,
			MethodName:   func(m uint16) string { return strings.ToLower(pb.Method(m).String()) },
			OnClientGone: s.intake.clientGone,
		})
		s.intake.connected = s.rpc.Connected
		return s, nil
	}
	r, err := recoverState(&s.cfg)
	if err != nil {
		return nil, err
	}
	if s.audit, err = openAudit(cfg.AuditLog, cfg.AuditMaxBytes, 0, s.log); err != nil {
		r.wal.Close()
		return nil, err
	}
	s.wal = r.wal
	if r.restarted {
		// Clients may hold locks the last run granted: as after a
		// failover, grant only their reclaims for a while.
		s.locks.Restart(s.locks.Timeout() / lockGraceShare)
	}
	s.metrics = newMetrics(s, r.stateMachine, cfg.Metrics)
	s.stats.storeGauges(r.stateMachine)
	s.stats.lsn.Store(r.nextLSN - 1)

	commits := make(chan *batch, 1)       // applier -> committer
	ckpts := make(chan *checkpointJob, 1) // committer -> checkpointer
	truncs := make(chan uint64, 1)        // checkpointer -> committer
	// checkpointer and dump encoders -> applier: one checkpoint and
	// maxDumps dumps may be encoding at once, and a frozen view the
	// applier has not yet taken back may wait beside each.
	thaw := make(chan *engine.Frozen, 2+maxDumps)
	dumps := newDumpTable(thaw, s.stopped, s.log)
	r.setOps(s.locks, s.cfg.Dir, dumps)
	s.release = &releaser{enabled: cfg.ReleaseMemory, wake: make(chan struct{}, 1), stopped: s.stopped}
	s.intake = &intake{
		reads: s.reads, writes: s.writes, failed: s.failed, stopped: s.stopped,
		locks: s.locks, fwd: r.stateMachine.fwd, leases: newLeaseTable(), storage: cfg.Storage, busy: s.metrics.busy, log: s.log, group: s.groupReply, dumps: dumps,
		hosting: cfg.Hosting,
		access: &access{creds: r.stateMachine.creds, grants: r.stateMachine.grants, clock: cfg.Clock, partition: cfg.Partition,
			log: s.log, audit: s.audit, refusals: rpc.NewLogLimiter(refusalLines, 4*refusalLines)},
	}
	s.apply = &applier{
		cfg: &s.cfg, state: r.stateMachine, reads: s.reads, writes: s.writes, out: commits,
		ckptBusy: &s.ckptBusy, thaw: thaw, failed: s.failed, fail: s.fail, freed: s.release.freed,
		stats: &s.stats, metrics: s.metrics, audit: s.audit,
	}
	s.replies = &replier{watch: s.watch}
	s.commit = &committer{
		log: r.wal, in: commits, truncs: truncs, ckpts: ckpts, deliver: s.replies.deliver, early: s.replies.deliverEarly,
		fail: s.fail, stats: &s.stats, metrics: s.metrics, logger: s.log, syncPause: cfg.EarlySyncPause,
	}
	s.ckpt = &checkpointer{
		fs: cfg.FS, dir: filepath.Clean(cfg.Dir), in: ckpts, truncs: truncs, stopped: s.stopped,
		older: r.ckptLSN, busy: &s.ckptBusy, thaw: thaw, freed: s.release.freed, metrics: s.metrics, logger: s.log,
	}
	s.intake.access.requireToken.Store(cfg.RequireToken)
	s.rpc = rpc.NewServer(rpc.HandlerFunc(s.intake.serveCall), rpc.ServerConfig{
		Secret: cfg.Secret, TLS: cfg.TLS, Logger: cfg.Logger, Metrics: cfg.Metrics,
		Authenticate: s.intake.access.authenticate, AuthenticateCert: s.intake.access.authenticateCert,
		MethodName:   func(m uint16) string { return strings.ToLower(pb.Method(m).String()) },
		OnClientGone: s.intake.clientGone,
	})
	s.intake.connected = s.rpc.Connected
	s.start(s.apply.run, s.commit.run, s.ckpt.run, func() { s.locks.Sweep(s.stopped, s.log) }, s.release.run,
		func() { s.intake.leaseSweep(s.stopped, s.locks.Timeout(), nil) })
	return s, nil
}

// start runs each loop on its own goroutine, counted in s.loops.
func (s *Server) start(loops ...func()) {
	s.loops.Add(len(loops))
	for _, loop := range loops {
		go func() {
			defer s.loops.Done()
			loop()
		}()
	}
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.rpc.Serve(ln); err != nil {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// RequireTokens makes the server refuse, from now on, every connection
// that presents no credential token, as Config.RequireToken does from the
// start: a server may first let a local connection in to create the
// credentials it will be administered with. Connections already open are
// not affected. Any goroutine may call it.
func (s *Server) RequireTokens() { s.intake.access.requireToken.Store(true) }

// Failed is closed when the server stopped serving because its log failed.
func (s *Server) Failed() <-chan struct{} { return s.failed }

// Shutdown stops accepting calls, waits (until ctx ends) for the calls in
// flight to be answered, and stops the server's goroutines. Everything
// acknowledged is already durable; nothing more is written.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		s.watch.stop()
		err = s.rpc.Shutdown(ctx)
		if err != nil {
			s.rpc.Close()
		}
		s.stopLoops()
	})
	return err
}

// Close stops the server at once; calls in flight get no reply.
func (s *Server) Close() error {
	s.stopOnce.Do(func() {
		s.watch.stop()
		s.rpc.Close()
		s.stopLoops()
	})
	return nil
}

// stopLoops ends the loops once no RPC reader can queue an operation any
// more: closing the queues lets the apply loop finish what is queued,
// which closes commits, which ends the committer, which closes ckpts,
// which ends the checkpointer.
func (s *Server) stopLoops() {
	close(s.stopped)
	close(s.reads)
	close(s.writes)
	if s.repl != nil {
		if err := s.repl.stop(); err != nil {
			s.log.Error("stop replica", "err", err)
		}
		s.loops.Wait()
		return
	}
	s.loops.Wait()
	s.audit.close()
	if err := s.wal.Close(); err != nil {
		s.log.Error("close log", "err", err)
	}
}

// fail marks the server failed after a log error.
func (s *Server) fail(err error) {
	s.failOnce.Do(func() {
		s.log.Error("transaction log failed; serving stops", "err", err)
		close(s.failed)
	})
}

// stats are counters the server keeps about itself; any goroutine may
// read them.
type stats struct {
	syncs     atomic.Uint64 // log fsyncs (one per batch with mutations)
	inodes    atomic.Int64  // nodes in the namespace, as of the last batch
	garbage   atomic.Int64  // slices in the garbage list, as of the last batch
	openFiles atomic.Int64  // files open, as of the last batch
	orphans   atomic.Int64  // open files with no links left, as of the last batch
	packed    atomic.Int64  // directories packed by the idle sweep, as of the last batch or step
	inflated  atomic.Uint64 // packed directories inflated for use
	sweeping  atomic.Int64  // 1 while the idle sweep has work left, 0 once a round found none
	lsn       atomic.Uint64 // last log record written
	records   atomic.Uint64 // log records written
	batches   atomic.Uint64 // batches applied
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	Syncs     uint64 // log fsyncs
	Records   uint64 // log records written (mutations)
	Batches   uint64 // batches the apply loop handed to the committer
	RetryHits uint64 // retried mutations answered from the retry cache
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	st := Stats{Syncs: s.stats.syncs.Load(), Records: s.stats.records.Load(), Batches: s.stats.batches.Load()}
	if s.repl != nil {
		st.RetryHits = s.repl.state.sm.retryHits.Load()
	} else {
		st.RetryHits = s.apply.state.retryHits.Load()
	}
	return st
}

// Status is what the server shows on its status page.
type Status struct {
	Partition uint16 `json:"partition"`
	Dir       string `json:"dir"`
	Inodes    int64  `json:"inodes"`
	LSN       uint64 `json:"lsn"`
	Stats     Stats  `json:"stats"`
}

// Status returns the server's current status; any goroutine may call it.
func (s *Server) Status() Status {
	return Status{
		Partition: s.cfg.Partition, Dir: s.cfg.Dir, Inodes: s.stats.inodes.Load(),
		LSN: s.stats.lsn.Load(), Stats: s.Stats(),
	}
}

// storeGauges publishes the engine's sizes for metrics; it runs on the
// apply loop (or before it starts), which owns sm.
func (st *stats) storeGauges(sm *stateMachine) {
	st.inodes.Store(int64(sm.eng.Len()))
	st.garbage.Store(int64(sm.eng.GarbageLen()))
	st.openFiles.Store(int64(sm.eng.OpenFiles()))
	st.orphans.Store(int64(sm.eng.Orphans()))
	st.packed.Store(int64(sm.eng.PackedDirs()))
	st.inflated.Store(sm.eng.Inflations())
}
