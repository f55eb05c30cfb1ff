package router

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	metaserver "github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// bound keeps every wait in a test finite.
const bound = 20 * time.Second

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
	t.Cleanup(cancel)
	return ctx
}

// memTables is a table source held in memory, standing in for the root
// partition's tables: tests edit it and routers long-poll it.
type memTables struct {
	mu      sync.Mutex
	rep     *pb.TablesReply
	changed chan struct{} // closed and replaced on every change
}

func newMemTables(mounts []*pb.MountEntry, routes map[uint32][]string) *memTables {
	m := &memTables{rep: &pb.TablesReply{Version: 1}, changed: make(chan struct{})}
	m.rep.Mounts = mounts
	m.rep.Routes = routeList(routes)
	return m
}

func routeList(routes map[uint32][]string) []*pb.Route {
	var out []*pb.Route
	for vp, addrs := range routes {
		out = append(out, &pb.Route{Vpart: vp, Addrs: addrs})
	}
	slices.SortFunc(out, func(a, b *pb.Route) int { return int(a.Vpart) - int(b.Vpart) })
	return out
}

func (m *memTables) tables(ctx context.Context, known uint64, wait time.Duration) (*pb.TablesReply, error) {
	m.mu.Lock()
	rep, ch := m.rep, m.changed
	m.mu.Unlock()
	if wait == 0 || rep.Version != known {
		return rep, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rep, nil
}

// edit changes the tables with fn, one version later, and returns the new
// version.
func (m *memTables) edit(fn func(rep *pb.TablesReply)) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	rep := &pb.TablesReply{Version: m.rep.Version + 1}
	for _, e := range m.rep.Mounts {
		rep.Mounts = append(rep.Mounts, &pb.MountEntry{Prefix: e.Prefix, Vpart: e.Vpart, Target: e.Target, ReadOnly: e.ReadOnly})
	}
	for _, r := range m.rep.Routes {
		rep.Routes = append(rep.Routes, &pb.Route{Vpart: r.Vpart, Addrs: slices.Clone(r.Addrs)})
	}
	fn(rep)
	slices.SortFunc(rep.Mounts, func(a, b *pb.MountEntry) int {
		switch {
		case a.Prefix < b.Prefix:
			return -1
		case a.Prefix > b.Prefix:
			return 1
		}
		return 0
	})
	m.rep = rep
	close(m.changed)
	m.changed = make(chan struct{})
	return rep.Version
}

// setMount adds or replaces a mount entry.
func setMount(rep *pb.TablesReply, e *pb.MountEntry) {
	rep.Mounts = slices.DeleteFunc(rep.Mounts, func(o *pb.MountEntry) bool { return o.Prefix == e.Prefix })
	rep.Mounts = append(rep.Mounts, e)
}

func removeMount(rep *pb.TablesReply, prefix string) {
	rep.Mounts = slices.DeleteFunc(rep.Mounts, func(o *pb.MountEntry) bool { return o.Prefix == prefix })
}

func setRoute(rep *pb.TablesReply, vp uint32, addrs ...string) {
	rep.Routes = slices.DeleteFunc(rep.Routes, func(o *pb.Route) bool { return o.Vpart == vp })
	rep.Routes = append(rep.Routes, &pb.Route{Vpart: vp, Addrs: addrs})
	slices.SortFunc(rep.Routes, func(a, b *pb.Route) int { return int(a.Vpart) - int(b.Vpart) })
}

// startPartition starts a metadata server for partition p.
func startPartition(t testing.TB, p uint16) (*metaserver.Server, string) {
	return servertest.Start(t, metaserver.Config{Partition: p})
}

// startRouter starts a router on 127.0.0.1 that reads its tables from src,
// closed when the test ends.
func startRouter(t testing.TB, src tableSource, cfg Config) *Router {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.TablesWait = time.Second
	r, err := start(testCtx(t), cfg, src)
	if err != nil {
		t.Fatalf("start router: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// dial connects an SDK client, closed when the test ends.
func dial(t testing.TB, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitVersion waits until every router uses tables version v or newer.
func waitVersion(t testing.TB, v uint64, routers ...*Router) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for _, r := range routers {
		for r.Version() < v {
			if time.Now().After(deadline) {
				t.Fatalf("router still at tables version %d, want %d", r.Version(), v)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
