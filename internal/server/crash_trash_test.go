package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/client"
)

// crashTrashEnv, set to a number of days, turns the crash child's trash on.
const crashTrashEnv = "CANOPY_CRASH_TRASH_DAYS"

// TestCrashWithTrash is the crash test with the trash on: what the
// workers remove goes to the trash, and no restart loses an entry of it
// (nothing restores or purges, and nothing expires within the test).
func TestCrashWithTrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server 6 times")
	}
	testCrashWith(t, 6, false, crashTrashEnv+"=1", "CANOPY_CRASH_CHECKPOINT_EVERY=100")
}

// crashTrash follows the trash across restarts: the entries seen after
// the last one.
type crashTrash struct {
	entries map[string]bool // hour/name
	seen    int
}

// newCrashTrash returns a follower when env turns the trash on, else nil.
func newCrashTrash(env []string) *crashTrash {
	for _, e := range env {
		if strings.HasPrefix(e, crashTrashEnv+"=") && e != crashTrashEnv+"=0" {
			return &crashTrash{entries: map[string]bool{}}
		}
	}
	return nil
}

// check compares the trash after a restart with what it held after the
// one before: every entry is still there, and the totals add up.
func (ct *crashTrash) check(c *client.Client) error {
	if ct == nil {
		return nil
	}
	tr, err := c.TrashList(context.Background(), "/")
	if err != nil {
		return fmt.Errorf("trash ls: %w", err)
	}
	now := map[string]bool{}
	var files uint64
	for _, e := range tr.Entries {
		now[e.Hour+"/"+e.Name] = true
		files += e.Files
		if e.Path == "" || !strings.HasPrefix(e.Path, "/w") {
			return fmt.Errorf("trash entry %s/%s: original path %q, want one below a worker's root", e.Hour, e.Name, e.Path)
		}
	}
	for k := range ct.entries {
		if !now[k] {
			return fmt.Errorf("trash entry %s lost by a restart", k)
		}
	}
	if files != tr.Files {
		return fmt.Errorf("trash totals %d files, its entries %d", tr.Files, files)
	}
	ct.entries, ct.seen = now, len(now)
	return nil
}
