package router

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/mount"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// view is one version of the tables as the router uses them: the compiled
// mount table and routing table, and what the router derives from them.
// It is immutable once published; a call loads it once and uses it
// throughout, so all its decisions come from one version. (mount.Current
// and mount.CurrentRouting each publish one table alone; the router
// publishes both, and what it derives, behind one pointer instead, so that
// no call sees the mount table of one version with the routing of
// another.)
type view struct {
	version uint64
	mounts  *mount.Snapshot
	routes  *mount.RoutingSnapshot

	// parts holds the partition each routed virtual partition is served
	// by; nil for a virtual partition without a group.
	parts [mount.VirtualPartitions]*partition

	// mounted marks the virtual partitions some entry names; readOnly
	// those that only read-only entries name (inode-based changes to them
	// are refused).
	mounted, readOnly [mount.VirtualPartitions]bool

	// rootPrefix maps a virtual partition to the prefix of the one entry
	// that mounts its root ("/"), so that a listing of the partition's root
	// inode shows the mount points below that prefix.
	rootPrefix map[uint16]string
}

// tableSource gives the router the tables.
type tableSource interface {
	// tables returns the tables when their version differs from known, or
	// when wait has passed (perhaps at the same version). With wait 0 it
	// returns them at once.
	tables(ctx context.Context, known uint64, wait time.Duration) (*pb.TablesReply, error)
}

// rootSource long-polls the root partition with TABLES_GET.
type rootSource struct {
	c *rpc.Client
}

func (s rootSource) tables(ctx context.Context, known uint64, wait time.Duration) (*pb.TablesReply, error) {
	req, err := proto.Marshal(&pb.TablesRequest{Ino: 1, KnownVersion: known, WaitMs: uint32(wait / time.Millisecond)})
	if err != nil {
		return nil, fmt.Errorf("encode tables request: %w", err)
	}
	status, out, err := s.c.Call(ctx, uint16(pb.Method_TABLES_GET), rpc.Cred{}, req)
	if err != nil {
		return nil, fmt.Errorf("get tables: %w", err)
	}
	if status != 0 {
		return nil, fmt.Errorf("get tables: %w", syscall.Errno(status))
	}
	var rep pb.TablesReply
	if err := proto.Unmarshal(out, &rep); err != nil {
		return nil, fmt.Errorf("decode tables: %w", err)
	}
	return &rep, nil
}

// compileView compiles a TablesReply into a view, with the partitions of
// the pool. It runs on the watcher goroutine.
func (r *Router) compileView(rep *pb.TablesReply) (*view, error) {
	t := mount.Table{Version: rep.Version, Entries: make([]mount.Entry, 0, len(rep.Mounts))}
	for _, m := range rep.Mounts {
		e, err := protocol.EntryFromWire(m)
		if err != nil {
			return nil, err
		}
		t.Entries = append(t.Entries, e)
	}
	sort.Slice(t.Entries, func(i, j int) bool { return t.Entries[i].Prefix < t.Entries[j].Prefix })
	snap, err := mount.Compile(t)
	if err != nil {
		return nil, fmt.Errorf("compile mount table version %d: %w", rep.Version, err)
	}
	rt := mount.Routing{Version: rep.Version, Groups: make(map[uint16][]string, len(rep.Routes))}
	for _, g := range rep.Routes {
		if g.Vpart >= mount.VirtualPartitions {
			return nil, fmt.Errorf("route: vpart %d out of range: %w", g.Vpart, syscall.EINVAL)
		}
		rt.Groups[uint16(g.Vpart)] = g.Addrs
	}
	routes, err := mount.CompileRouting(rt)
	if err != nil {
		return nil, fmt.Errorf("compile routing table version %d: %w", rep.Version, err)
	}
	v := &view{version: rep.Version, mounts: snap, routes: routes, rootPrefix: make(map[uint16]string)}
	var writable [mount.VirtualPartitions]bool
	roots := make(map[uint16]int)
	snap.Entries(func(e *mount.Entry) bool {
		v.mounted[e.VPart] = true
		if !e.ReadOnly {
			writable[e.VPart] = true
		}
		if e.Target == "/" {
			roots[e.VPart]++
			v.rootPrefix[e.VPart] = e.Prefix
		}
		return true
	})
	for vp, n := range roots {
		if n != 1 {
			delete(v.rootPrefix, vp)
		}
	}
	for vp := range v.readOnly {
		v.readOnly[vp] = v.mounted[vp] && !writable[vp]
	}
	for vp, addrs := range rt.Groups {
		v.parts[vp] = r.pool.partition(vp, addrs)
	}
	if v.parts[0] == nil && r.rootPart != nil {
		// The root partition is where the router reads the tables, so
		// virtual partition 0 needs no route of its own: a router in
		// front of a fresh root partition serves it at once.
		v.parts[0] = r.rootPart
	}
	return v, nil
}

// install publishes v if it is newer than the live view, and reports
// whether it did. It runs on the watcher goroutine (and in Start, before
// the watcher exists).
func (r *Router) install(v *view) bool {
	old := r.view.Load()
	if old != nil && v.version <= old.version {
		return false
	}
	r.view.Store(v)
	if old == nil {
		old = &view{} // at start: every partition is new to this router
	}
	if spansPartitions(v) {
		if newly := newlyMounted(old, v); len(newly) > 0 {
			r.slow.Add(1)
			go func() {
				defer r.slow.Done()
				r.spreadOwnerQuotas(v, newly)
			}()
		}
	}
	if m := r.metrics; m != nil {
		m.tableVersion.Set(float64(v.version))
	}
	if un := unrouted(v); len(un) > 0 {
		r.log.Warn("mount entries name virtual partitions without a route", "version", v.version, "vparts", un)
	}
	r.log.Info("tables installed", "version", v.version, "mounts", v.mounts.Len())
	return true
}

// unrouted lists the virtual partitions that mount entries of v point at
// and that have no partition to forward to.
func unrouted(v *view) []uint16 {
	var un []uint16
	for vp := range v.mounted {
		if v.mounted[vp] && v.parts[vp] == nil {
			un = append(un, uint16(vp))
		}
	}
	return un
}

// load gets the tables once, compiles and installs them.
func (r *Router) load(ctx context.Context, known uint64, wait time.Duration) error {
	rep, err := r.src.tables(ctx, known, wait)
	if err != nil {
		return err
	}
	if rep.Version == known && known != 0 {
		return nil
	}
	v, err := r.compileView(rep)
	if err != nil {
		return err
	}
	r.install(v)
	return nil
}

// watch is the watcher goroutine: it long-polls the tables with the
// version it holds, so that a change reaches it as soon as the root
// partition commits it, and installs each new version.
func (r *Router) watch(ctx context.Context) {
	defer r.wg.Done()
	failures := 0
	for ctx.Err() == nil {
		known := r.view.Load().version
		err := r.load(ctx, known, r.cfg.TablesWait)
		if err == nil {
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		// A failed poll (root partition down, a bad table): back off, with
		// jitter, and ask again; the view in place keeps serving.
		pause := time.Duration(rand.N(int64(min(time.Millisecond<<min(failures, 10), time.Second)))) + time.Millisecond
		failures++
		lvl := r.log.Debug
		if !errors.Is(err, rpc.ErrTimeout) {
			lvl = r.log.Warn
		}
		lvl("polling the tables failed; retrying", "err", err, "in", pause)
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}
