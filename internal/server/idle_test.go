package server

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A server left alone packs its idle directories, and what it serves
// afterwards is the same: every name is found, listings are complete and
// in order, and a new entry lands next to the packed ones.
func TestIdleSweepPacksDirectories(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, c := serveOn(t, Config{Dir: t.TempDir(), Metrics: reg, IdleRound: 10 * time.Millisecond, ReleaseMemory: true, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	const files = 1500
	if _, err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		if _, err := c.Create(ctx, fmt.Sprintf("/d/f%04d", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The root and /d are packed once the sweep has run two rounds.
	deadline := time.Now().Add(20 * time.Second)
	for metric(t, reg, "canopy_meta_packed_dirs") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%v directories packed after 20 s idle, want 2", metric(t, reg, "canopy_meta_packed_dirs"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if w := metric(t, reg, "canopy_meta_idle_work_total"); w < files {
		t.Fatalf("idle work %v after packing %d entries", w, files)
	}
	for _, i := range []int{0, 777, files - 1} {
		if _, err := c.Stat(ctx, fmt.Sprintf("/d/f%04d", i)); err != nil {
			t.Fatalf("stat after packing: %v", err)
		}
	}
	if n := metric(t, reg, "canopy_meta_dir_inflations_total"); n < 2 {
		t.Fatalf("%v inflations after stats through both packed directories", n)
	}
	if _, err := c.Create(ctx, "/d/new", 0o644); err != nil {
		t.Fatal(err)
	}
	ents, err := c.ReadDir(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	if len(names) != files+1 || names[0] != "f0000" || names[files-1] != fmt.Sprintf("f%04d", files-1) || names[files] != "new" {
		t.Fatalf("listing after packing: %d names, first %q, last %q", len(names), names[0], names[len(names)-1])
	}
}

// canopy_meta_idle_sweep_busy says when the sweep has finished: once it
// has done work and reads 0 again, every directory is packed.
func TestIdleSweepBusyGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, c := serveOn(t, Config{Dir: t.TempDir(), Metrics: reg, IdleRound: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	for d := range 3 {
		if _, err := c.Mkdir(ctx, fmt.Sprintf("/d%d", d), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 700 {
			if _, err := c.Create(ctx, fmt.Sprintf("/d%d/f%04d", d, i), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for metric(t, reg, "canopy_meta_idle_work_total") == 0 || metric(t, reg, "canopy_meta_idle_sweep_busy") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sweep still busy after 30 s idle (work %v, busy %v)", metric(t, reg, "canopy_meta_idle_work_total"), metric(t, reg, "canopy_meta_idle_sweep_busy"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := metric(t, reg, "canopy_meta_packed_dirs"); n != 4 {
		t.Fatalf("sweep idle with %v directories packed, want 4 (the root and three)", n)
	}
}

// metric returns the value of the counter or gauge name in reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
