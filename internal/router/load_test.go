package router

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// startReal starts a router that reads its tables from the root partition
// at root, as `canopy router` does.
func startReal(t testing.TB, root string) *Router {
	t.Helper()
	r, err := Start(testCtx(t), Config{
		Listen: "127.0.0.1:0", Root: []string{root}, TablesWait: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("start router: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func update(t testing.TB, admin *client.Client, u client.TablesUpdate) uint64 {
	t.Helper()
	tb, err := admin.UpdateTables(testCtx(t), u)
	if err != nil {
		t.Fatalf("update tables: %v", err)
	}
	return tb.Version
}

// created is one file or directory a client made, and when.
type created struct {
	path       string
	ino        client.Ino
	start, end time.Time
}

// tablesState is what the tables said about the paths the test creates.
type tablesState struct {
	mMounted bool   // /m is mounted from vpart 3 /t (else it is /m in vpart 0)
	route2   string // the server serving vpart 2, mounted at /r
	// set is when the change was made; installed, when every router used it.
	set, installed time.Time
}

// Mount entries come and go and a routing entry moves while 8 clients, on
// two routers, create files under the paths concerned: no operation fails,
// and each lands, once, where the tables said it would at the time.
func TestTablesChangeUnderLoad(t *testing.T) {
	ctx := testCtx(t)
	_, a0 := startPartition(t, 0)
	_, a2a := startPartition(t, 2)
	_, a2b := startPartition(t, 2)
	_, a3 := startPartition(t, 3)
	d0, d2a, d2b, d3 := dial(t, a0), dial(t, a2a), dial(t, a2b), dial(t, a3)
	for _, mk := range []struct {
		c *client.Client
		p string
	}{{d0, "/m"}, {d0, "/static"}, {d3, "/t"}} {
		if err := mk.c.MkdirAll(ctx, mk.p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	update(t, d0, client.TablesUpdate{
		SetMounts: []client.MountEntry{{Prefix: "/r", VPart: 2, Target: "/"}},
		SetRoutes: []client.Route{{VPart: 0, Addrs: []string{a0}}, {VPart: 2, Addrs: []string{a2a}}, {VPart: 3, Addrs: []string{a3}}},
	})
	routers := []*Router{startReal(t, a0), startReal(t, a0)}
	states := []tablesState{{route2: a2a}}

	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		mu     sync.Mutex
		made   []created
		failed []error
		ops    atomic.Int64
	)
	for i := range 8 {
		c := dial(t, routers[i%2].Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				ops.Add(1)
				start := time.Now()
				var (
					fi  *client.FileInfo
					err error
					p   string
				)
				switch n % 6 {
				case 0:
					p = fmt.Sprintf("/m/c%d-%d", i, n)
					fi, err = c.Create(ctx, p, 0o644)
				case 1:
					p = fmt.Sprintf("/r/c%d-%d", i, n)
					fi, err = c.Create(ctx, p, 0o644)
				case 2:
					p = fmt.Sprintf("/m/d%d-%d", i, n)
					fi, err = c.Mkdir(ctx, p, 0o755)
				case 3:
					_, err = c.Stat(ctx, "/static")
				case 4:
					_, err = c.ReadDir(ctx, "/static")
				default:
					_, err = c.ReadDir(ctx, "/")
				}
				end := time.Now()
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else if p != "" {
					made = append(made, created{p, fi.Ino(), start, end})
				}
				mu.Unlock()
			}
		}()
	}
	waitOps := func(n int64) {
		for target := ops.Load() + n; ops.Load() < target; {
			time.Sleep(time.Millisecond)
		}
	}
	change := func(next tablesState, u client.TablesUpdate) {
		waitOps(100)
		next.set = time.Now()
		v := update(t, d0, u)
		waitVersion(t, v, routers...)
		next.installed = time.Now()
		states = append(states, next)
	}
	for range 3 {
		s := states[len(states)-1]
		s.mMounted = true
		change(s, client.TablesUpdate{SetMounts: []client.MountEntry{{Prefix: "/m", VPart: 3, Target: "/t"}}})
		s.route2 = a2b
		change(s, client.TablesUpdate{SetRoutes: []client.Route{{VPart: 2, Addrs: []string{a2b}}}})
		s.mMounted = false
		change(s, client.TablesUpdate{RemoveMounts: []string{"/m"}})
		s.route2 = a2a
		change(s, client.TablesUpdate{SetRoutes: []client.Route{{VPart: 2, Addrs: []string{a2a}}}})
	}
	waitOps(100)
	stop.Store(true)
	wg.Wait()

	for _, err := range failed {
		t.Errorf("operation failed: %v", err)
	}
	if t.Failed() {
		t.FailNow()
	}
	exists := func(c *client.Client, p string) bool {
		_, err := c.Lstat(ctx, p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stat %s: %v", p, err)
		}
		return err == nil
	}
	counts := map[string]int{}
	for _, op := range made {
		// The states the op may have seen: from the last one every router
		// used when it started to the last one set when it ended.
		first, last := 0, 0
		for k, s := range states {
			if !s.installed.After(op.start) {
				first = k
			}
			if !s.set.After(op.end) {
				last = k
			}
		}
		name := op.path[strings.LastIndexByte(op.path, '/')+1:]
		var where string
		var ok bool
		if strings.HasPrefix(op.path, "/m/") {
			inP0, inP3 := exists(d0, "/m/"+name), exists(d3, "/t/"+name)
			if inP0 == inP3 {
				t.Fatalf("%s: in partition 0: %v, in partition 3: %v; want exactly one", op.path, inP0, inP3)
			}
			where = map[bool]string{true: "vpart 3", false: "vpart 0"}[inP3]
			wantPart := map[bool]uint16{true: 3, false: 0}[inP3]
			if partOf(op.ino) != wantPart {
				t.Fatalf("%s: inode %#x, but the file is in partition %d", op.path, op.ino, wantPart)
			}
			for _, s := range states[first : last+1] {
				ok = ok || s.mMounted == inP3
			}
		} else {
			inA, inB := exists(d2a, "/"+name), exists(d2b, "/"+name)
			if inA == inB {
				t.Fatalf("%s: on the first server of vpart 2: %v, on the second: %v; want exactly one", op.path, inA, inB)
			}
			addr := map[bool]string{true: a2a, false: a2b}[inA]
			where = addr
			for _, s := range states[first : last+1] {
				ok = ok || s.route2 == addr
			}
		}
		if !ok {
			t.Fatalf("%s (%v to %v) landed in %s; the tables said %+v", op.path, op.start, op.end, where, states[first:last+1])
		}
		counts[where]++
	}
	t.Logf("%d operations, %d creates checked, %d table changes; creates by place: %v", ops.Load(), len(made), len(states)-1, counts)
	if len(counts) < 4 {
		t.Fatalf("creates landed in only %v: the changes did not take effect under load", counts)
	}
}

// One of two routers is closed under load: the clients go on through the
// other, every operation succeeds (after retries), and every create is
// applied exactly once, even those in flight through the closed router.
func TestClientsFailOverWhenARouterCloses(t *testing.T) {
	ctx := testCtx(t)
	_, a0 := startPartition(t, 0)
	_, a1 := startPartition(t, 1)
	d0, d1 := dial(t, a0), dial(t, a1)
	update(t, d0, client.TablesUpdate{
		SetMounts: []client.MountEntry{{Prefix: "/p1", VPart: 1, Target: "/"}},
		SetRoutes: []client.Route{{VPart: 0, Addrs: []string{a0}}, {VPart: 1, Addrs: []string{a1}}},
	})
	r1, r2 := startReal(t, a0), startReal(t, a0)
	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		mu     sync.Mutex
		made   []string
		failed []error
		ops    atomic.Int64
	)
	for i := range 8 {
		addrs := r1.Addr() + "," + r2.Addr()
		if i%2 == 1 {
			addrs = r2.Addr() + "," + r1.Addr()
		}
		c := dial(t, addrs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				ops.Add(1)
				var err error
				p := ""
				switch n % 3 {
				case 0:
					p = fmt.Sprintf("/p1/c%d-%d", i, n)
					_, err = c.Create(ctx, p, 0o644)
				case 1:
					p = fmt.Sprintf("/c%d-%d", i, n)
					_, err = c.Mkdir(ctx, p, 0o755)
				default:
					_, err = c.Stat(ctx, "/p1")
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else if p != "" {
					made = append(made, p)
				}
				mu.Unlock()
			}
		}()
	}
	waitOps := func(n int64) {
		for target := ops.Load() + n; ops.Load() < target && !t.Failed(); {
			time.Sleep(time.Millisecond)
		}
	}
	waitOps(500)
	if err := r1.Close(); err != nil {
		t.Errorf("close router: %v", err)
	}
	waitOps(500)
	stop.Store(true)
	wg.Wait()
	for _, err := range failed {
		t.Errorf("operation failed: %v", err)
	}
	for _, p := range made {
		c, inner := d0, p
		if strings.HasPrefix(p, "/p1/") {
			c, inner = d1, strings.TrimPrefix(p, "/p1")
		}
		if _, err := c.Lstat(ctx, inner); err != nil {
			t.Fatalf("%s, created through a router, is not in its partition: %v", p, err)
		}
	}
	t.Logf("%d operations, %d creates", ops.Load(), len(made))
}
