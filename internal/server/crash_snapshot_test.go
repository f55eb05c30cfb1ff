package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// TestCrashWithSnapshots is the crash test with snapshots and clones:
// each worker changes its tree as the crash workers do, and now and then
// takes a snapshot of it, removes its oldest snapshot, or clones one of
// its files. After every restart each worker's tree and every snapshot it
// holds (read through ROOT/.snapshot/NAME) equal its model, the state on
// disk passed the invariant check (loadAndKill), and the quota on the
// root agrees with a fresh count of the tree.
func TestCrashWithSnapshots(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server 6 times")
	}
	const workers, cycles = 3, 6
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	env := []string{"CANOPY_CRASH_CHECKPOINT_EVERY=100"}
	child := startCrashChild(t, dir, env...)
	setup, err := client.Dial(child.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := setup.SetQuota(ctx, "/", 1<<40, 0); err != nil {
		t.Fatal(err)
	}
	ws := make([]*snapWorker, workers)
	for i := range ws {
		cw := &crashWorker{id: i + 10, rng: rand.New(rand.NewPCG(seed, uint64(i+2)))}
		cw.model = map[string]bool{cw.root(): true}
		ws[i] = &snapWorker{w: cw, m: snapModel{tree: cw.model, snaps: map[string]map[string]bool{}}}
		if _, err := setup.Mkdir(ctx, cw.root(), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	setup.Close()
	for cycle := range cycles {
		child = loadAndKill(t, cycle, child, dir, ws, rng)
		c, err := client.Dial(child.addr, client.Options{Cred: &client.Cred{}})
		if err != nil {
			t.Fatal(err)
		}
		fail := func(err error) {
			c.Close()
			child.kill()
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		for _, w := range ws {
			if err := w.check(ctx, c); err != nil {
				fail(err)
			}
		}
		if n, bad, err := c.CheckQuotas(ctx, "/", false); err != nil || n != 1 || len(bad) > 0 {
			fail(fmt.Errorf("quota check: %d quotas, mismatches %+v, %v", n, bad, err))
		}
		c.Close()
	}
	child.kill()
	acked, snaps := 0, 0
	for _, w := range ws {
		acked += w.w.acked
		snaps += w.taken
	}
	t.Logf("%d operations acknowledged, %d snapshots taken, over %d crashes", acked, snaps, cycles)
	if snaps == 0 {
		t.Fatal("no snapshot was taken: the load did not run")
	}
}

// snapModel is what a snapshot worker's root holds: its tree, as the
// crash worker's model (absolute paths), and each snapshot's tree, with
// the same paths (the root's, not the .snapshot path).
type snapModel struct {
	tree  map[string]bool
	snaps map[string]map[string]bool
	order []string // snapshot names, oldest first
}

func (m snapModel) clone() snapModel {
	out := snapModel{tree: maps.Clone(m.tree), snaps: map[string]map[string]bool{}, order: slices.Clone(m.order)}
	for k, v := range m.snaps {
		out.snaps[k] = v // snapshots never change: shared
	}
	return out
}

type snapOp struct {
	desc  string
	apply func(m *snapModel)
}

// snapWorker is a crash worker that also takes, removes and clones.
type snapWorker struct {
	w       *crashWorker
	m       snapModel
	pending *snapOp
	n       int
	taken   int // snapshots acknowledged
}

func (s *snapWorker) pick() (snapOp, func(context.Context, *client.Client) error) {
	s.w.model = s.m.tree
	root := s.w.root()
	k := s.w.rng.IntN(20)
	var files []string
	for p, isDir := range s.m.tree {
		if !isDir {
			files = append(files, p)
		}
	}
	sort.Strings(files)
	switch {
	case k < 2:
		s.n++
		name := fmt.Sprintf("s%d", s.n)
		return snapOp{"snapshot create " + root + " " + name, func(m *snapModel) {
				m.snaps[name] = maps.Clone(m.tree)
				m.order = append(m.order, name)
			}},
			func(ctx context.Context, c *client.Client) error {
				_, err := c.SnapshotCreate(ctx, root, name)
				return err
			}
	case k < 3 && len(s.m.order) > 2:
		name := s.m.order[0]
		return snapOp{"snapshot rm " + root + " " + name, func(m *snapModel) {
				delete(m.snaps, name)
				m.order = slices.DeleteFunc(m.order, func(n string) bool { return n == name })
			}},
			func(ctx context.Context, c *client.Client) error { return c.SnapshotRemove(ctx, root, name) }
	case k < 4 && len(files) > 0:
		s.n++
		from := files[s.w.rng.IntN(len(files))]
		to := path.Join(root, fmt.Sprintf("clone%d", s.n))
		return snapOp{"clone " + from + " " + to, func(m *snapModel) { m.tree[to] = false }},
			func(ctx context.Context, c *client.Client) error { _, err := c.Clone(ctx, from, to); return err }
	}
	op, do := s.w.pick()
	return snapOp{op.desc, func(m *snapModel) { op.apply(m.tree) }}, do
}

func (s *snapWorker) run(addr string, stop <-chan struct{}) error {
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}, OpTimeout: 2 * time.Second, CallTimeout: time.Second})
	if err != nil {
		return nil // the server died before we connected: nothing in flight
	}
	defer c.Close()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		op, do := s.pick()
		if err := do(context.Background(), c); err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) && isErrno(pe.Err) {
				return fmt.Errorf("worker %d: %s: %w (model and server disagree)", s.w.id, op.desc, err)
			}
			s.pending = &op
			return nil
		}
		op.apply(&s.m)
		if strings.HasPrefix(op.desc, "snapshot create") {
			s.taken++
		}
		s.w.acked++
	}
}

// read returns what the server holds of the worker's root and snapshots.
func (s *snapWorker) read(ctx context.Context, c *client.Client) (snapModel, error) {
	root := s.w.root()
	got := snapModel{snaps: map[string]map[string]bool{}}
	var err error
	if got.tree, err = readTree(ctx, c, root, root); err != nil {
		return got, err
	}
	list, err := c.SnapshotList(ctx, root)
	if err != nil {
		return got, fmt.Errorf("snapshot ls %s: %w", root, err)
	}
	for _, sn := range list {
		top := path.Join(root, client.SnapshotDir, sn.Name)
		t, err := readTree(ctx, c, top, root)
		if err != nil {
			return got, err
		}
		got.snaps[sn.Name] = t
	}
	return got, nil
}

// readTree walks the tree at top and returns its paths as if below as.
func readTree(ctx context.Context, c *client.Client, top, as string) (map[string]bool, error) {
	got := map[string]bool{as: true}
	var walk func(p string) error
	walk = func(p string) error {
		ents, err := c.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			child := path.Join(p, e.Name())
			got[as+strings.TrimPrefix(child, top)] = e.IsDir()
			if e.IsDir() {
				if err := walk(child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return got, walk(top)
}

func sameSnaps(a, b snapModel) bool {
	if !sameTree(a.tree, b.tree) || len(a.snaps) != len(b.snaps) {
		return false
	}
	for k, t := range a.snaps {
		if u, ok := b.snaps[k]; !ok || !sameTree(t, u) {
			return false
		}
	}
	return true
}

func (s *snapWorker) check(ctx context.Context, c *client.Client) error {
	got, err := s.read(ctx, c)
	if err != nil {
		return err
	}
	if sameSnaps(got, s.m) {
		s.pending = nil
		return nil
	}
	if s.pending != nil {
		applied := s.m.clone()
		s.pending.apply(&applied)
		if sameSnaps(got, applied) {
			s.m, s.pending = applied, nil
			return nil
		}
	}
	pending := "none"
	if s.pending != nil {
		pending = s.pending.desc
	}
	var gs, ws []string
	for k, t := range got.snaps {
		gs = append(gs, fmt.Sprint(k, keys(t)))
	}
	for k, t := range s.m.snaps {
		ws = append(ws, fmt.Sprint(k, keys(t)))
	}
	sort.Strings(gs)
	sort.Strings(ws)
	return fmt.Errorf("worker %d: state differs from the model (operation in flight: %s)\n got: %v %v\nwant: %v %v",
		s.w.id, pending, keys(got.tree), gs, keys(s.m.tree), ws)
}
