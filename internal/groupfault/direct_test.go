package groupfault

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// TestDirectClientLeaderStopped: a client given the group's replicas
// directly (no router), connected to the leader, goes on when the leader
// is SIGSTOPped: its call in flight and the next ones are answered by the
// new leader. Without the client's watchdog, the calls would wait on the
// stopped leader's open connection attempt after attempt (the per-attempt
// timeout is longer than the call's) and fail.
func TestDirectClientLeaderStopped(t *testing.T) {
	const tick = 50 * time.Millisecond
	c := newCluster(t, 3, tick)
	ctx := context.Background()
	// One attempt may take 15 s and the whole call 25 s: a client that
	// kept waiting on the stopped leader would fail its call.
	cl, err := client.Dial(strings.Join(c.addrs, ","), client.Options{Cred: &client.Cred{},
		CallTimeout: 15 * time.Second, OpTimeout: 25 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.MkdirAll(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 20 { // the client has followed NOT_LEADER to the leader
		if _, err := cl.Create(ctx, fmt.Sprintf("/d/before-%d", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := c.waitLeader(20 * time.Second)
	c.signal(old, syscall.SIGSTOP)
	stopped := time.Now()
	defer c.signal(old, syscall.SIGCONT) // the cleanup kills it
	for i := range 20 {
		if _, err := cl.Create(ctx, fmt.Sprintf("/d/after-%d", i), 0o644); err != nil {
			t.Fatalf("create %d after the leader (replica %d) stopped: %v", i, old+1, err)
		}
		if i == 0 {
			t.Logf("first create acknowledged %v after replica %d (leader) was stopped", time.Since(stopped), old+1)
		}
	}
	names, err := cl.ReadDir(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 40 {
		t.Fatalf("/d holds %d names, want 40", len(names))
	}
	if l := c.leader(); l == old || l < 0 {
		t.Fatalf("leader after the stop: replica %d", l+1)
	}
	c.signal(old, syscall.SIGCONT)
	c.converge(60 * time.Second)
}
