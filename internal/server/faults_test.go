package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/vfs"
)

// TestCrashImagesHoldAcknowledgedCreates takes crash images of an
// in-memory file system (only what was synced survives) while clients
// create files, and checks that each image recovers every create that was
// acknowledged before the image was taken.
func TestCrashImagesHoldAcknowledgedCreates(t *testing.T) {
	mem := vfs.NewMem()
	_, c := serveOn(t, Config{Dir: "/meta", FS: mem, CheckpointEvery: 97})
	ctx := context.Background()

	const workers, perWorker = 4, 300
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			dir := fmt.Sprintf("/w%d", w)
			if _, err := c.Mkdir(ctx, dir, 0o755); err != nil {
				t.Error(err)
				return
			}
			for i := range perWorker {
				p := fmt.Sprintf("%s/f%d", dir, i)
				if _, err := c.Create(ctx, p, 0o644); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, p)
				mu.Unlock()
			}
		})
	}
	type image struct {
		fs    *vfs.MemFS
		acked []string
	}
	var images []image
	rng := rand.New(rand.NewPCG(1, 2))
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(time.Duration(rng.IntN(3000)) * time.Microsecond):
		}
		mu.Lock()
		before := append([]string(nil), acked...)
		mu.Unlock()
		images = append(images, image{fs: mem.Crash(), acked: before})
	}
	if len(acked) != workers*perWorker {
		t.Fatalf("%d creates acknowledged, want %d", len(acked), workers*perWorker)
	}
	for i, img := range images {
		s, err := recoverOffline(Config{Dir: "/meta", FS: img.fs, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("image %d: recover: %v", i, err)
		}
		if err := s.eng.Check(); err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		for _, p := range img.acked {
			if _, err := s.eng.Resolve(engine.Root, p, false); err != nil {
				t.Fatalf("image %d: acknowledged %s lost: %v", i, p, err)
			}
		}
		s.wal.Close()
	}
	t.Logf("%d crash images checked", len(images))
}

// TestSyncFailureStopsServing fails the log's fsync and checks that the
// server stops answering (it cannot promise durability any more), that the
// failed calls are not acknowledged, and that a restart recovers exactly
// the acknowledged state.
func TestSyncFailureStopsServing(t *testing.T) {
	mem := vfs.NewMem()
	var failing atomic.Bool
	faulty := vfs.NewFaulty(mem, func(op vfs.Op, name string) error {
		if failing.Load() && op == vfs.OpSync {
			return vfs.ErrInjected
		}
		return nil
	})
	s, c := serveOn(t, Config{Dir: "/meta", FS: faulty})
	ctx := context.Background()
	if _, err := c.Create(ctx, "/kept", 0o644); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	_, err := c.Create(ctx, "/lost", 0o644)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("create with failing fsync: %v, want EIO", err)
	}
	select {
	case <-s.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("server did not report the failure")
	}
	if _, err := c.Stat(ctx, "/kept"); err == nil {
		t.Fatal("failed server still answers")
	}
	s.Close()

	r, err := recoverOffline(Config{Dir: "/meta", FS: mem.Crash(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.wal.Close()
	if _, err := r.eng.Resolve(engine.Root, "/kept", false); err != nil {
		t.Errorf("acknowledged /kept lost: %v", err)
	}
	if _, err := r.eng.Resolve(engine.Root, "/lost", false); err == nil {
		t.Errorf("unacknowledged /lost survived a crash after its fsync failed")
	}
}
