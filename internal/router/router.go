package router

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Router is a running federation router.
type Router struct {
	cfg     Config
	log     *slog.Logger
	src     tableSource
	pool    *pool
	metrics *metrics // nil without a registry

	// view is the tables in use, written by the watcher goroutine only.
	view atomic.Pointer[view]

	// rootPart is the root partition as Config.Root names it: where
	// TABLES_* calls go.
	rootPart *partition
	rootConn *rpc.Client // the watcher's connection to it; nil in tests

	inflight [2]atomic.Int64 // calls in flight, by rpc.Class
	limit    [2]int64

	srv *rpc.Server
	ln  net.Listener

	sessions    sessions                   // clients' sessions (session.go)
	sessionEnds atomic.Int64               // SESSION_ENDs answered by the partitions
	creds       atomic.Pointer[auth.Table] // the router's copy of the credentials (creds.go); nil until read
	quotaSets   sync.Mutex                 // held by a namespace quota set or spread, one at a time (ownerquota_set.go)
	self        rpc.ClientID               // the client id of the router's own forwarded calls

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the watcher and the serving goroutine
	slow   sync.WaitGroup // goroutines serving calls that span partitions
	once   sync.Once
}

// Start starts a router: it reads the tables from the root partition,
// listens on cfg.Listen and returns once it serves. ctx bounds the start
// only.
func Start(ctx context.Context, cfg Config) (*Router, error) {
	if len(cfg.Root) == 0 {
		return nil, fmt.Errorf("router: no root partition address: %w", syscall.EINVAL)
	}
	cfg.setDefaults()
	var (
		rc   *rpc.Client
		errs []error
	)
	for _, addr := range cfg.Root {
		c, err := rpc.Dial(addr, rpc.ClientConfig{
			Secret: cfg.Secret, Token: cfg.Token, Logger: cfg.Logger,
			CallTimeout: cfg.TablesWait + 10*time.Second, OpTimeout: 2*cfg.TablesWait + 20*time.Second,
		})
		if err == nil {
			rc = c
			break
		}
		errs = append(errs, err)
	}
	if rc == nil {
		return nil, fmt.Errorf("router: reach the root partition: %w", errors.Join(errs...))
	}
	r, err := start(ctx, cfg, rootSource{rc})
	if err != nil {
		rc.Close()
		return nil, err
	}
	r.rootConn = rc
	return r, nil
}

// start starts a router that gets its tables from src.
func start(ctx context.Context, cfg Config, src tableSource) (*Router, error) {
	cfg.setDefaults()
	r := &Router{cfg: cfg, log: cfg.Logger, src: src}
	crand.Read(r.self[:])
	r.limit[rpc.ClassRead], r.limit[rpc.ClassWrite] = int64(cfg.MaxReads), int64(cfg.MaxWrites)
	r.metrics = newMetrics(cfg.Registry, func(c rpc.Class) float64 { return float64(r.inflight[c].Load()) })
	r.pool = newPool(rpc.ClientConfig{Secret: cfg.Secret, Token: cfg.Token, Logger: cfg.Logger}, cfg.ConnsPerServer, cfg.Logger, r.metrics)
	r.pool.router = r.self
	if len(cfg.Root) > 0 {
		r.rootPart = r.pool.partition(0, cfg.Root)
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())

	if err := r.loadFirst(ctx); err != nil {
		r.cancel()
		r.pool.close()
		return nil, err
	}
	r.pool.warm(r.view.Load(), 2*time.Second)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		r.cancel()
		r.pool.close()
		return nil, fmt.Errorf("router: listen: %w", err)
	}
	r.ln = ln
	scfg := rpc.ServerConfig{
		Secret: cfg.Secret, TLS: cfg.TLS, Logger: cfg.Logger,
		MethodName:   func(m uint16) string { return pb.Method_name[int32(m)] },
		Authenticate: acceptToken, AuthenticateCert: acceptCert,
		OnClientGone: r.clientGone,
	}
	if cfg.Registry != nil {
		scfg.Metrics = cfg.Registry
	}
	r.srv = rpc.NewServer(rpc.HandlerFunc(r.serve), scfg)
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		if err := r.srv.Serve(ln); err != nil {
			r.log.Error("router stopped serving", "err", err)
		}
	}()
	go r.watch(r.ctx)
	if cfg.XRenameEvery > 0 {
		r.wg.Add(1)
		go r.recoverIntents(r.ctx, cfg.XRenameEvery, cfg.XRenameGrace)
	}
	if r.rootPart != nil {
		r.wg.Add(1)
		go r.syncCreds(r.ctx)
	}
	if cfg.MoveEvery > 0 && len(cfg.Root) > 0 {
		r.wg.Add(1)
		go r.recoverMoves(r.ctx, cfg.MoveEvery)
	}
	r.log.Info("router serving", "addr", r.Addr(), "tables", r.view.Load().version)
	return r, nil
}

// loadFirst loads the first tables, retrying failures that may pass until
// ctx ends.
func (r *Router) loadFirst(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := r.load(ctx, 0, 0)
		if err == nil {
			return nil
		}
		// The root partition's refusal (not partition 0, not speaking the
		// table methods, a table that does not compile) will not pass.
		var se *rpc.StatusError
		var errno syscall.Errno
		if errors.As(err, &se) && se.Status == rpc.StatusUnknownMethod || errors.As(err, &errno) {
			return fmt.Errorf("router: load tables: %w", err)
		}
		pause := time.Duration(rand.N(int64(min(time.Millisecond<<min(attempt, 10), time.Second)))) + time.Millisecond
		r.log.Warn("loading the tables failed; retrying", "err", err, "in", pause)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("router: load tables: %w (%w)", err, ctx.Err())
		}
	}
}

// Addr returns the address the router serves on.
func (r *Router) Addr() string { return r.ln.Addr().String() }

// Version returns the version of the tables the router uses.
func (r *Router) Version() uint64 { return r.view.Load().version }

// Close stops the router at once: it closes its listener and client
// connections (calls in flight get no reply; clients retry them elsewhere)
// and its connections to the partitions, and waits for its goroutines.
func (r *Router) Close() error {
	var err error
	r.once.Do(func() {
		r.cancel()
		err = r.srv.Close()
		r.slow.Wait()
		r.wg.Wait()
		r.pool.close()
		if r.rootConn != nil {
			r.rootConn.Close()
		}
	})
	return err
}
