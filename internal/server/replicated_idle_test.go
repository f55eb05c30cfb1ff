package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// In the replicated mode every replica packs its idle directories on its
// own; their states stay byte-identical, and the packed directory serves
// as before.
func TestReplicatedIdleSweep(t *testing.T) {
	g := newGroup(t, 3)
	lead := g.leader()
	cl := dial(t, g.peers[lead].Addr, client.Cred{})
	ctx := context.Background()
	if _, err := cl.Mkdir(ctx, "/big", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := cl.Create(ctx, fmt.Sprintf("/big/f%d", i), 0o644); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	packed := func(i int) int {
		rs := g.srvs[i].repl.state
		rs.mu.Lock()
		defer rs.mu.Unlock()
		return rs.sm.eng.PackedDirs()
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := range 3 {
		for packed(i) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("replica %d packed no directory while idle", i+1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	g.waitSame(lead, (lead+1)%3)
	g.waitSame(lead, (lead+2)%3)
	if _, err := cl.Stat(ctx, "/big/f123"); err != nil {
		t.Fatalf("stat in a packed directory: %v", err)
	}
	if _, err := cl.Create(ctx, "/big/new", 0o644); err != nil {
		t.Fatalf("create in a packed directory: %v", err)
	}
	g.waitSame(lead, (lead+1)%3)
}
