package fuse

import (
	"context"
	"log/slog"
	"sync/atomic"
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
	// NegativeTimeout is how long the kernel may cache that a name is
	// absent, and how long after making a directory the mount answers
	// itself that a name not made in it through the mount is absent
	// (fresh.go). 0, the default, asks the service at every lookup of an
	// absent name, so a name another client makes is seen at once.
	NegativeTimeout time.Duration
	// ReadOnly mounts read-only: every change fails with EROFS.
	ReadOnly bool
	// AllowOther lets users other than the one who mounted use the mount.
	AllowOther bool
	// NoDefaultPermissions turns off the kernel's permission checks
	// (FUSE's default_permissions, on otherwise) and leaves them to the
	// service. The kernel then checks nothing for what never reaches the
	// mount: opening FIFOs and device nodes, and the search permission of
	// directories whose entries it has cached.
	NoDefaultPermissions bool
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

// DefaultOptions are the options of `canopy mount` without flags.
func DefaultOptions() Options {
	return Options{AttrTimeout: DefaultAttrTimeout, EntryTimeout: DefaultEntryTimeout}
}

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
	noCaps noCaps // files known to have no security.capability
	// releasing counts the RELEASEs being served, which close files at
	// the service (Rename waits for them on EBUSY).
	releasing atomic.Int64
	// dirAttrs keeps a directory's attributes from a create's reply
	// for the GETATTR the kernel sends next.
	dirAttrs dirAttrs
	// fresh follows the directories this mount has just made, whose
	// absent names it answers itself (fresh.go).
	fresh freshDirs
	// held counts the handles holding attribute changes back
	// (deferattr.go).
	held heldTotal
	// srv is the go-fuse server, set by Init before any request is
	// served; it sends the kernel cache invalidations.
	srv *gofuse.Server
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
		noCaps:        noCaps{ttl: opts.AttrTimeout},
		dirAttrs:      dirAttrs{ttl: opts.AttrTimeout},
		fresh:         freshDirs{window: opts.NegativeTimeout},
	}
}

// Init keeps the server, through which the mount tells the kernel to drop
// cached attributes.
func (fs *FS) Init(srv *gofuse.Server) { fs.srv = srv }

// dropAttrs makes the kernel forget the attributes it has for ino, so
// that the next stat or permission check asks the service again.
func (fs *FS) dropAttrs(ino client.Ino) {
	if fs.srv == nil {
		return
	}
	if st := fs.srv.InodeNotify(uint64(ino), -1, 0); st != gofuse.OK && st != gofuse.ENOENT {
		fs.log.Warn("fuse attribute invalidation failed", "ino", uint64(ino), "status", st)
	}
}

// String names the file system (the "fuse.canopy" type of the mount).
func (fs *FS) String() string { return "canopy" }

// asWhole returns the context of a request and a client acting as its
// caller. The request runs to its end even when the kernel interrupts the
// caller: a Go program is interrupted often, by the runtime's preemption
// signals, and an abandoned LOOKUP would fail the caller's mknod or open
// with EINTR, which no local file system does; an abandoned change may
// still be applied, and the caller's retry of an interrupted mkdir would
// then fail with EEXIST. The client's own operation timeout still bounds
// the call. Lock waits, which can last, are interruptible (locks.go).
func (fs *FS) asWhole(caller *gofuse.Caller) (context.Context, *client.Client) {
	return &gofuse.Context{Caller: *caller}, fs.c.As(fs.credOf(caller))
}

// observe records an operation when it returns; use it as
// defer fs.observe(op, time.Now(), &st).
func (fs *FS) observe(op string, start time.Time, st *gofuse.Status) {
	fs.m.done(op, start, *st)
}

// fail converts err to a status, logging what is not a plain errno.
func (fs *FS) fail(op string, err error) gofuse.Status {
	st := errStatus(err)
	if st == gofuse.ENOENT && nodeOps[op] {
		st = gofuse.Status(syscall.ESTALE)
	}
	if st == gofuse.EIO || st == gofuse.Status(syscall.ETIMEDOUT) {
		fs.log.Warn("fuse operation failed", "op", op, "err", err)
	}
	return st
}

// nodeOps are the operations on a node id alone. A node id the kernel
// holds names a node that is gone (ENOENT) when another client removed it
// or a rename moved it to another partition, which numbered it anew; such
// an operation answers ESTALE instead, on which the kernel walks the path
// of a path-based call again, looking every name up afresh, as for NFS's
// stale handles: a moved node is found at its new number, and a removed
// one is missing (ENOENT) by that lookup. A LOOKUP in a directory that is
// gone is answered ESTALE by the service.
var nodeOps = map[string]bool{opGetattr: true, opSetattr: true, opReadlink: true, opAccess: true,
	opGetxattr: true, opListxattr: true, opOpen: true, opOpendir: true}

// readOnly reports whether changes are refused.
func (fs *FS) readOnly() bool { return fs.opts.ReadOnly }
