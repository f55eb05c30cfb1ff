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
	RetryCacheSize  int                   // mutations remembered for retries; default 65536
	CheckpointEvery int                   // log records between checkpoints; default 1,000,000
	Secret          string                // shared secret clients must present; "" = none
	Logger          *slog.Logger          // default slog.Default()
	Clock           func() int64          // nanoseconds since the epoch; default time.Now
	Metrics         prometheus.Registerer // where to register the server's metrics; nil = nowhere
	TLS             *tls.Config           // serve TLS; nil = plain TCP
	TableWatches    int                   // long-polling TABLES_GET calls parked at once; default 1024
	Storage         string                // object store URL that VOLUME tells clients (object.Open), without secrets
	LockTimeout     time.Duration         // a client holding file locks and silent this long loses them; default 10 s

	// The idle sweep packs directories unused for a while (idle.go).
	IdleBudget        int           // work per step (entries packed plus directories visited); default 1000
	IdleRound         time.Duration // pause between rounds of the sweep; default 1s
	CompactEveryBatch bool          // run the sweep to its end after every batch (tests: every operation meets packed directories)

	// ReleaseMemory returns freed memory to the operating system after a
	// checkpoint is written and when the idle sweep has packed what it
	// could, at most every 10 s (memory.go).
	ReleaseMemory bool
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
	if c.IdleBudget <= 0 {
		c.IdleBudget = 1000
	}
	if c.IdleRound <= 0 {
		c.IdleRound = time.Second
	}
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = 1_000_000
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

// Server is a running metadata server.
type Server struct {
	cfg Config
	log *slog.Logger
	rpc *rpc.Server

	// Owned by the apply loop (and by Open before the loop starts).
	eng               *engine.Engine
	cache             *retryCache
	sessions          sessions // files open per client
	nextLSN           uint64   // the LSN the next log record will get
	lastNow           int64
	sinceCkpt         int
	ckptLSN           uint64      // the checkpoint recovery started from; read by the checkpointer at start
	lastNamespaceSize int         // bytes of the namespace in the last checkpoint encoded
	idlePause         time.Time   // no idle sweep round starts before this; see idle.go
	idleTimer         *time.Timer // wakes the apply loop for the next round
	idleBusy          bool        // the last idle step did work

	// Owned by the committer.
	wal *wal.Log

	reads    chan *op            // RPC readers -> apply loop: queries
	writes   chan *op            // RPC readers -> apply loop: mutations
	commits  chan *batch         // apply loop -> committer
	ckpts    chan *checkpointJob // committer -> checkpointer
	release  chan struct{}       // apply loop, checkpointer -> releaseLoop: memory was freed
	truncs   chan uint64         // checkpointer -> committer
	ckptBusy atomic.Bool         // a checkpoint is being written

	watch *tablesWatch // parked TABLES_GET long polls; see dispatch_tables.go
	locks *lockTable   // file locks per client session; see locks.go

	stats   stats
	metrics *metrics

	stopOnce sync.Once
	stopped  chan struct{} // closed when Close starts
	failed   chan struct{} // closed when the log fails
	failOnce sync.Once
	loops    sync.WaitGroup
}

// Open recovers the partition stored in cfg.Dir (creating an empty one if
// there is none) and starts the apply loop, committer and checkpointer. It
// does not listen: call Serve.
func Open(cfg Config) (*Server, error) {
	cfg.setDefaults()
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		cache:    newRetryCache(cfg.RetryCacheSize),
		sessions: make(sessions),
		reads:    make(chan *op, cfg.QueueSize),
		writes:   make(chan *op, cfg.QueueSize),
		commits:  make(chan *batch, 1),
		ckpts:    make(chan *checkpointJob, 1),
		release:  make(chan struct{}, 1),
		truncs:   make(chan uint64, 1),
		stopped:  make(chan struct{}),
		failed:   make(chan struct{}),
		watch:    newTablesWatch(cfg.TableWatches),
		locks:    newLockTable(cfg.LockTimeout, nil),
	}
	if err := s.recover(); err != nil {
		return nil, err
	}
	s.metrics = newMetrics(s, cfg.Metrics)
	s.storeGauges()
	s.stats.lsn.Store(s.nextLSN - 1)
	s.rpc = rpc.NewServer(rpc.HandlerFunc(s.serveCall), rpc.ServerConfig{
		Secret: cfg.Secret, TLS: cfg.TLS, Logger: cfg.Logger, Metrics: cfg.Metrics,
		MethodName:   func(m uint16) string { return strings.ToLower(pb.Method(m).String()) },
		OnClientGone: s.clientGone,
	})
	s.loops.Add(5)
	go s.applyLoop()
	go s.commitLoop()
	go s.checkpointLoop()
	go s.expireLocks()
	go s.releaseLoop()
	return s, nil
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.rpc.Serve(ln); err != nil {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

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
// more: closing the queues lets the apply loop finish what is queued, which
// closes commits, which ends the committer.
func (s *Server) stopLoops() {
	close(s.stopped)
	close(s.reads)
	close(s.writes)
	s.loops.Wait()
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

// logDir is where the log and checkpoints of the partition live.
func (s *Server) logDir() string { return filepath.Clean(s.cfg.Dir) }

// stats are counters the server keeps about itself; any goroutine may
// read them.
type stats struct {
	syncs     atomic.Uint64 // log fsyncs (one per batch with mutations)
	retryHits atomic.Uint64 // retried mutations answered from the retry cache
	inodes    atomic.Int64  // nodes in the namespace, as of the last batch
	garbage   atomic.Int64  // slices in the garbage list, as of the last batch
	openFiles atomic.Int64  // files open, as of the last batch
	orphans   atomic.Int64  // open files with no links left, as of the last batch
	packed    atomic.Int64  // directories packed by the idle sweep, as of the last batch or step
	inflated  atomic.Uint64 // packed directories inflated for use
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
	return Stats{Syncs: s.stats.syncs.Load(), Records: s.stats.records.Load(), Batches: s.stats.batches.Load(),
		RetryHits: s.stats.retryHits.Load()}
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
// apply loop (or before it starts).
func (s *Server) storeGauges() {
	s.stats.inodes.Store(int64(s.eng.Len()))
	s.stats.garbage.Store(int64(s.eng.GarbageLen()))
	s.stats.openFiles.Store(int64(s.eng.OpenFiles()))
	s.stats.orphans.Store(int64(s.eng.Orphans()))
	s.stats.packed.Store(int64(s.eng.PackedDirs()))
	s.stats.inflated.Store(s.eng.Inflations())
}
