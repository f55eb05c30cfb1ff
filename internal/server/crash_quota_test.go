package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/canopyfs/canopy/client"
)

// TestCrashWithQuotas is the crash test with directory quotas on the root
// and on every worker's directory: after every restart the usage the
// server keeps equals a fresh count of its tree (QUOTA_CHECK) and the
// number of nodes the workers' models hold.
func TestCrashWithQuotas(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server 10 times")
	}
	// Checkpoints every 100 records, so restarts load quotas from them too.
	testCrashWith(t, 10, true, "CANOPY_CRASH_CHECKPOINT_EVERY=100")
}

// setCrashQuotas sets the quotas: limits far above what the workers make,
// so that every operation the workers' models expect to succeed does.
func setCrashQuotas(t *testing.T, c *client.Client, ws []*crashWorker) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.SetQuota(ctx, "/", 1<<40, 0); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if _, err := c.SetQuota(ctx, w.root(), 1<<30, 1<<40); err != nil {
			t.Fatal(err)
		}
	}
}

// checkCrashQuotas compares the quotas with a full count and with the
// workers' models (each path in a model is one node below the root, its
// root included).
func checkCrashQuotas(c *client.Client, ws []*crashWorker) error {
	ctx := context.Background()
	n, bad, err := c.CheckQuotas(ctx, "/", false)
	if err != nil {
		return fmt.Errorf("quota check: %w", err)
	}
	if n != len(ws)+1 || len(bad) > 0 {
		return fmt.Errorf("quota check: %d quotas, mismatches %+v", n, bad)
	}
	total := uint64(0)
	for _, w := range ws {
		q, err := c.GetQuota(ctx, w.root())
		if err != nil {
			return fmt.Errorf("quota of %s: %w", w.root(), err)
		}
		if want := uint64(len(w.model) - 1); q.Files != want {
			return fmt.Errorf("quota of %s: %d files, the model has %d", w.root(), q.Files, want)
		}
		total += q.Files + 1
	}
	q, err := c.GetQuota(ctx, "/")
	if err != nil {
		return fmt.Errorf("quota of /: %w", err)
	}
	if q.Files != total {
		return fmt.Errorf("quota of /: %d files, the workers' quotas add up to %d", q.Files, total)
	}
	return nil
}
