package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/canopyfs/canopy/client"
)

// TestCrashWithQuotas is the crash test with directory quotas on the root
// and on every worker's directory, and user and group quotas on root's
// uid and gid: after every restart the usage the server keeps equals a
// fresh count of its tree (QUOTA_CHECK, OWNER_QUOTA_CHECK) and the number
// of nodes the workers' models hold.
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
	for _, kind := range []uint32{client.QuotaUser, client.QuotaGroup} {
		if _, err := c.SetOwnerQuota(ctx, "/", kind, 0, 1<<40, 1<<50); err != nil {
			t.Fatal(err)
		}
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
	n, obad, err := c.CheckOwnerQuotas(ctx, "/", false)
	if err != nil || n != 2 || len(obad) > 0 {
		return fmt.Errorf("owner quota check: %d quotas, mismatches %+v, %v", n, obad, err)
	}
	// Root owns every node: the root directory and all below it.
	for _, kind := range []uint32{client.QuotaUser, client.QuotaGroup} {
		oq, err := c.GetOwnerQuota(ctx, "/", kind, 0)
		if err != nil {
			return fmt.Errorf("owner quota %d of 0: %w", kind, err)
		}
		if oq.Files != total+1 {
			return fmt.Errorf("owner quota %d of 0: %d files, the tree has %d nodes", kind, oq.Files, total+1)
		}
	}
	return nil
}
