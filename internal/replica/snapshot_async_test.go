package replica

import (
	"fmt"
	"io"
	"testing"
	"time"
)

// gatedKV is a kv whose snapshots are written only once gate is closed.
type gatedKV struct {
	*kv
	gate <-chan struct{}
}

func (g *gatedKV) Snapshot() (func(io.Writer) error, func(), error) {
	write, release, err := g.kv.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	return func(w io.Writer) error { <-g.gate; return write(w) }, release, nil
}

// TestSnapshotWrittenBesideApplies: while every replica's snapshot is
// being written (held back by a gate), the group goes on committing and
// applying, and records no snapshot; once the writes end each replica
// has one, and a replica restarted from its disk has every key.
func TestSnapshotWrittenBesideApplies(t *testing.T) {
	gate := make(chan struct{})
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotEntries, cfg.CatchUpEntries = 10, 5
		cfg.StateMachine = &gatedKV{kv: cfg.StateMachine.(*kv), gate: gate}
	})
	for i := range 12 {
		c.put(fmt.Sprintf("k%d", i), "v")
	}
	// Every replica has frozen a snapshot by now and is held in its write.
	var last uint64
	for i := 12; i < 60; i++ {
		last = c.put(fmt.Sprintf("k%d", i), "v") // would wait forever if the write held the raft goroutine
	}
	for _, id := range c.peers {
		c.waitApplied(id, last)
		if s := c.status(id); s.SnapshotIndex != 0 {
			t.Fatalf("replica %d recorded snapshot %d while its write was held", id, s.SnapshotIndex)
		}
	}
	close(gate)
	for _, id := range c.peers {
		waitFor(t, 10*time.Second, fmt.Sprintf("replica %d's snapshot", id), func() bool { return c.status(id).SnapshotIndex != 0 })
	}
	// A restart reads the snapshot back and replays the rest of the log.
	id := c.peers[0]
	if err := c.nodes[id].Stop(); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, id)
	c.start(id, c.peers)
	c.waitApplied(id, last)
	for i := range 60 {
		if _, ok := c.sms[id].get(fmt.Sprintf("k%d", i)); !ok {
			t.Fatalf("replica %d restarted without k%d", id, i)
		}
	}
}
