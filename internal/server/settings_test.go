package server

import (
	"context"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// trashHolds checks what the trash of c's partition says: its days and
// how many entries it holds.
func trashHolds(t *testing.T, c *client.Client, days, entries int) {
	t.Helper()
	tr, err := c.TrashList(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Days != days || len(tr.Entries) != entries {
		t.Fatalf("trash: %d days and %d entries, want %d and %d", tr.Days, len(tr.Entries), days, entries)
	}
}

// TestTrashDaysAreLogged: the trash's days are state, not the
// configuration of the process that replays. A removal logged with the
// trash on is replayed with it on by a server started with --trash-days 0
// (before, the replay freed the file), whose restart record then turns
// the trash off for what follows; a removal logged with it off frees
// again on a replay by a server started with the trash on.
func TestTrashDaysAreLogged(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Dir: t.TempDir(), Storage: "file://" + t.TempDir(), TrashDays: 1}
	s, c := serveOn(t, cfg)
	for _, p := range []string{"/a", "/b"} {
		if err := c.WriteFile(ctx, p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Remove(ctx, "/a"); err != nil {
		t.Fatal(err)
	}
	trashHolds(t, c, 1, 1)
	shutdown(t, s) // writes nothing more: the removal is replayed from the log

	cfg.TrashDays = 0
	s, c = serveOn(t, cfg)
	trashHolds(t, c, 0, 1)
	if err := c.Remove(ctx, "/b"); err != nil {
		t.Fatal(err)
	}
	trashHolds(t, c, 0, 1)
	shutdown(t, s)

	cfg.TrashDays = 1
	s, c = serveOn(t, cfg)
	trashHolds(t, c, 1, 1)
	shutdown(t, s)
}

// TestReplicatedTrashDaysAreLogged: a group's replicas apply removals
// with the trash days their leader logged, whatever each was started
// with. The group starts with the trash on everywhere; a replica
// restarted with it off and made leader turns it off for all, and every
// replica holds the same state throughout.
func TestReplicatedTrashDaysAreLogged(t *testing.T) {
	g := newGroupOf(&group{t: t, srvs: make([]*Server, 3), trash: []int{1, 1, 1}})
	lead := g.leader()
	ctx := context.Background()
	c := dial(t, g.peers[lead].Addr, client.Cred{})
	for _, p := range []string{"/a", "/b"} { // directories: the group has no object store
		if _, err := c.Mkdir(ctx, p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Remove(ctx, "/a"); err != nil {
		t.Fatal(err)
	}
	trashHolds(t, c, 1, 1)
	g.waitSame(lead, (lead+1)%3)
	g.waitSame(lead, (lead+2)%3)

	next := (lead + 1) % 3
	g.stop(next)
	g.trash[next] = 0
	g.start(next)
	g.waitSame(lead, next)
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.srvs[lead].repl.node.TransferLeadership(tctx, g.peers[next].ID); err != nil {
		t.Fatalf("transfer to replica %d: %v", next+1, err)
	}
	if got := g.leader(); got != next {
		t.Fatalf("replica %d leads, not %d", got+1, next+1)
	}
	c = dial(t, g.peers[next].Addr, client.Cred{})
	if err := c.Remove(ctx, "/b"); err != nil {
		t.Fatal(err)
	}
	trashHolds(t, c, 0, 1)
	g.waitSame(next, lead)
	g.waitSame(next, (next+1)%3)
}
