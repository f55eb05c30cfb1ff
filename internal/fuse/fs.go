package fuse

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopyfs/canopy/client"
)

// Options configure a mount.
type Options struct {
	// AttrTimeout and EntryTimeout are how long the kernel may cache a
	// node's attributes and a name's lookup before asking again.
	AttrTimeout  time.Duration
	EntryTimeout time.Duration
	// ReadOnly mounts read-only: every change fails with EROFS.
	ReadOnly bool
	// AllowOther lets users other than the one who mounted use the mount.
	AllowOther bool
	// DefaultPermissions makes the kernel check permissions from the
	// attributes it has, before asking the service, which checks again.
	DefaultPermissions bool
	// FsName is the mount's source, shown by df and /proc/mounts.
	FsName string
	// Metrics, if set, receives the per-operation metrics.
	Metrics prometheus.Registerer
	// Logger receives failures that are not plain errnos (lost
	// connections); nil logs nowhere.
	Logger *slog.Logger
	// Debug logs every FUSE request and reply (go-fuse's debug output).
	Debug bool
}

// Default cache timeouts.
const (
	DefaultAttrTimeout  = time.Second
	DefaultEntryTimeout = time.Second
)

// FS is the FUSE file system: go-fuse's raw interface over a Canopy
// client. Operations it does not implement answer ENOSYS.
type FS struct {
	gofuse.RawFileSystem

	c      *client.Client
	opts   Options
	log    *slog.Logger
	m      *metrics
	groups *groupCache
	dirs   handles[*dirHandle]
	files  handles[*fileHandle]
	open   openFiles
	locks  heldLocks
}

// New returns the file system serving c's namespace.
func New(c *client.Client, opts Options) *FS {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	registerCacheMetrics(opts.Metrics, c)
	return &FS{
		RawFileSystem: gofuse.NewDefaultRawFileSystem(),
		c:             c,
		opts:          opts,
		log:           log,
		m:             newMetrics(opts.Metrics),
		groups:        newGroupCache(),
	}
}

// String names the file system (the "fuse.canopy" type of the mount).
func (fs *FS) String() string { return "canopy" }

// as returns the context of a request (done when the kernel interrupts
// it) and a client acting as its caller.
func (fs *FS) as(cancel <-chan struct{}, caller *gofuse.Caller) (context.Context, *client.Client) {
	return &gofuse.Context{Caller: *caller, Cancel: cancel}, fs.c.As(fs.credOf(caller))
}

// asMutation is as for a call that changes the namespace: it is not
// abandoned when the kernel interrupts the caller (a Go program is
// interrupted often, by the runtime's preemption signals). An abandoned
// change may still be applied, and the caller's retry of an interrupted
// mkdir would then fail with EEXIST; the client's own operation timeout
// still bounds the call.
func (fs *FS) asMutation(caller *gofuse.Caller) (context.Context, *client.Client) {
	return fs.as(nil, caller)
}

// observe records an operation when it returns; use it as
// defer fs.observe(op, time.Now(), &st).
func (fs *FS) observe(op string, start time.Time, st *gofuse.Status) {
	fs.m.done(op, start, *st)
}

// fail converts err to a status, logging what is not a plain errno.
func (fs *FS) fail(op string, err error) gofuse.Status {
	st := errStatus(err)
	if st == gofuse.EIO || st == gofuse.Status(syscall.ETIMEDOUT) {
		fs.log.Warn("fuse operation failed", "op", op, "err", err)
	}
	return st
}

// readOnly reports whether changes are refused.
func (fs *FS) readOnly() bool { return fs.opts.ReadOnly }
