package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestSingleReplica(t *testing.T) {
	c := newCluster(t, 1, nil)
	if lead := c.leader(); lead != 1 {
		t.Fatalf("leader %d, want 1", lead)
	}
	var last uint64
	for i := range 50 {
		last = c.put(fmt.Sprint("k", i), fmt.Sprint("v", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.nodes[1].Read(ctx); err != nil {
		t.Fatalf("Read: %v", err)
	}
	if v, _ := c.sms[1].get("k49"); v != "v49" {
		t.Fatalf("k49 = %q after a read", v)
	}
	// A clean restart replays the log.
	if err := c.nodes[1].Stop(); err != nil {
		t.Fatal(err)
	}
	c.start(1, c.peers)
	c.waitApplied(1, last)
	if v, _ := c.sms[1].get("k7"); v != "v7" {
		t.Fatalf("after restart k7 = %q", v)
	}
}

func TestThreeReplicasReplicate(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader()
	var last uint64
	for i := range 100 {
		last = c.put(fmt.Sprint("k", i), fmt.Sprint("v", i))
	}
	for _, id := range c.peers {
		c.waitApplied(id, last)
		if v, _ := c.sms[id].get("k99"); v != "v99" {
			t.Fatalf("replica %d: k99 = %q", id, v)
		}
	}
	// A follower refuses proposals and names the leader.
	follower := c.peers[0]
	if follower == lead {
		follower = c.peers[1]
	}
	_, err := c.nodes[follower].Propose(context.Background(), []byte("x=y"))
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != lead {
		t.Fatalf("proposal at a follower: %v, want NotLeaderError naming %d", err, lead)
	}
	// A follower's read is linearizable too: it asks the leader.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	idx := c.put("late", "1")
	if err := c.nodes[follower].Read(ctx); err != nil {
		t.Fatalf("Read at a follower: %v", err)
	}
	if v, _ := c.sms[follower].get("late"); v != "1" {
		t.Fatalf("follower read after Read misses the write at %d", idx)
	}
}
