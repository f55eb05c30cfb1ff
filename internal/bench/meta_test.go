package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// consumes reports whether op's rounds end when their items run out.
func consumes(op string) bool {
	return op == "create" || op == "mkdir" || op == "rename" || op == "unlink"
}

func TestMetaOps(t *testing.T) {
	cs := startServer(t, 2)
	ctx := context.Background()
	const threads, files, rounds = 3, 20, 2
	for _, shared := range []bool{false, true} {
		for _, op := range MetaOps {
			t.Run(fmt.Sprintf("%s/shared=%v", op, shared), func(t *testing.T) {
				cfg := MetaConfig{
					Run:   Config{Workers: threads, Duration: 200 * time.Millisecond, Warmup: 50 * time.Millisecond, Rounds: rounds},
					Conns: cs, Op: op, Files: files, Dir: "/b", Shared: shared, ReadRatio: 0.5, Page: 7,
				}
				if consumes(op) {
					cfg.Run.Duration = time.Minute // the items end each round
				}
				results, err := RunMeta(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if len(results) != 1 {
					t.Fatalf("%d results, want 1", len(results))
				}
				r := results[0]
				if r.Errors != 0 {
					t.Fatalf("%d errors, first: %s", r.Errors, r.FirstError)
				}
				if r.Mode != "meta" || r.Op != op || r.Clients != threads || r.Conns != 2 || len(r.PerRound) != rounds {
					t.Errorf("result %+v", r)
				}
				if consumes(op) && r.Ops != threads*files*rounds {
					t.Errorf("%d ops, want every item once: %d", r.Ops, threads*files*rounds)
				}
				if r.Ops == 0 || r.OpsPerSec <= 0 || r.P50Us <= 0 {
					t.Errorf("%d ops at %v ops/s, p50 %vµs", r.Ops, r.OpsPerSec, r.P50Us)
				}
				if _, err := cs.For(0).Lstat(ctx, "/b"); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("after the run /b: %v, want it removed", err)
				}
			})
		}
	}
}

// names lists directory p.
func names(t *testing.T, cs Conns, p string) []string {
	t.Helper()
	var out []string
	if _, err := listDir(context.Background(), cs.For(0), p, 3, false, func(e *client.DirEntry) { out = append(out, e.Name()) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestMetaKeepsTheTree(t *testing.T) {
	cs := startServer(t, 1)
	ctx := context.Background()
	run := Config{Workers: 2, Duration: time.Minute, Rounds: 1}
	if _, err := RunMeta(ctx, MetaConfig{Run: run, Conns: cs, Op: "rename", Files: 4, Dir: "/k", Keep: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, cs, "/k/rename/t001/r1"), []string{"g0", "g1", "g2", "g3"}; !slices.Equal(got, want) {
		t.Errorf("renamed: %v, want %v", got, want)
	}
	run.Duration = 100 * time.Millisecond
	if _, err := RunMeta(ctx, MetaConfig{Run: run, Conns: cs, Op: "stat", Files: 3, Dir: "/k", Shared: true, Keep: true}); err != nil {
		t.Fatal(err)
	}
	want := []string{"t000.f0", "t000.f1", "t000.f2", "t001.f0", "t001.f1", "t001.f2"}
	if got := names(t, cs, "/k/stat/shared"); !slices.Equal(got, want) {
		t.Errorf("shared stat files: %v, want %v", got, want)
	}
	if err := removeTree(ctx, cs, "/k", 4); err != nil {
		t.Fatal(err)
	}
	if got := names(t, cs, "/"); len(got) != 0 {
		t.Errorf("after removeTree / holds %v", got)
	}
}

func TestMetaLeavesForeignTreesAlone(t *testing.T) {
	cs := startServer(t, 1)
	ctx := context.Background()
	if err := cs.For(0).MkdirAll(ctx, "/mine/stat", 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := RunMeta(ctx, MetaConfig{Run: Config{Workers: 1, Duration: 50 * time.Millisecond, Rounds: 1}, Conns: cs, Op: "stat", Files: 1, Dir: "/mine"})
	if err == nil || !strings.Contains(err.Error(), "/mine/stat exists") {
		t.Fatalf("err %v, want /mine/stat exists", err)
	}
	if got := names(t, cs, "/mine"); !slices.Equal(got, []string{"stat"}) {
		t.Errorf("/mine holds %v, want it untouched", got)
	}
}

func TestMetaConfigIsChecked(t *testing.T) {
	cs := startServer(t, 1)
	run := Config{Workers: 1, Duration: time.Second}
	for _, cfg := range []MetaConfig{
		{Run: run, Conns: cs, Op: "chmod", Files: 1},
		{Run: run, Conns: cs, Op: "stat", Files: 0},
		{Run: run, Conns: cs, Op: "mixed", Files: 1, ReadRatio: 1.5},
		{Run: run, Conns: cs, Op: "stat", Files: 1, Dir: "relative"},
		{Run: run, Op: "stat", Files: 1},
	} {
		if _, err := RunMeta(context.Background(), cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}
