package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/canopyfs/canopy/client"
)

// Checkpoints taken while clients keep changing the namespace are encoded
// by the checkpointer, not on the apply loop: the apply loop's pause is
// recorded in canopy_meta_checkpoint_pause_seconds (buckets from 100 µs),
// the encoding in canopy_meta_checkpoint_encode_seconds, and a restart
// from the last checkpoint and the log holds exactly what the clients
// were told was done.
func TestCheckpointsWhileServing(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	s, addr := openAndServe(t, Config{Dir: dir, CheckpointEvery: 10, Metrics: reg, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	const workers, files = 4, 150
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		c := dial(t, addr, client.Cred{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := fmt.Sprintf("/w%d", w)
			if _, err := c.Mkdir(ctx, d, 0o755); err != nil {
				errs <- err
				return
			}
			for i := range files {
				p := fmt.Sprintf("%s/f%d", d, i)
				if _, err := c.Create(ctx, p, 0o644); err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					if err := c.Unlink(ctx, p); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	shutdown(t, s)

	pause := histogram(t, reg, "canopy_meta_checkpoint_pause_seconds")
	if pause.GetSampleCount() < 10 {
		t.Fatalf("%d checkpoint pauses recorded over %d mutations, checkpoint every 10", pause.GetSampleCount(), workers*files)
	}
	if b := pause.GetBucket(); len(b) == 0 || b[0].GetUpperBound() != 0.0001 || b[len(b)-1].GetUpperBound() != 10 {
		t.Fatalf("pause buckets %v, want 0.0001 .. 10", b)
	}
	if enc := histogram(t, reg, "canopy_meta_checkpoint_encode_seconds"); enc.GetSampleCount() == 0 || enc.GetSampleCount() > pause.GetSampleCount() {
		t.Fatalf("%d checkpoints encoded, %d taken", enc.GetSampleCount(), pause.GetSampleCount())
	}

	_, c := serveOn(t, Config{Dir: dir})
	for w := range workers {
		for i := range files {
			p := fmt.Sprintf("/w%d/f%d", w, i)
			_, err := c.Stat(ctx, p)
			if want := i%3 != 0; (err == nil) != want {
				t.Fatalf("after restart, stat %s: %v (want present: %v)", p, err, want)
			}
		}
	}
}

// histogram returns the histogram name in reg.
func histogram(t *testing.T, reg *prometheus.Registry, name string) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}
