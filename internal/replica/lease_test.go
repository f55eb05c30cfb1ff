package replica

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counter returns the value of counter name for replica id in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string, id uint64) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "replica", fmt.Sprint(id)) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// TestLeaseReads: with LeaseReads, the leader answers reads under its
// lease (no ReadIndex round), every read sees the writes acknowledged
// before it, a follower's read still goes through the leader, and a
// leadership transfer ends the old leader's lease.
func TestLeaseReads(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newCluster(t, 3, func(cfg *Config) { cfg.LeaseReads, cfg.Registerer = true, reg })
	lead := c.leader()
	for i := range 50 {
		c.put("k", fmt.Sprint(i))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.nodes[lead].Read(ctx)
		cancel()
		if err != nil && !isRetryable(err) {
			t.Fatalf("read %d: %v", i, err)
		}
		if err == nil {
			if v, _ := c.sms[lead].get("k"); v != fmt.Sprint(i) {
				t.Fatalf("read after k=%d acknowledged sees k=%q", i, v)
			}
		}
	}
	// The lease is renewed by rounds of its own: poll until reads are
	// served under it.
	waitFor(t, 10*time.Second, "a read served under the lease", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.nodes[lead].Read(ctx)
		return counter(t, reg, "canopy_replica_lease_reads_total", lead) > 0
	})
	follower := c.others(lead)[0]
	last := c.put("k", "last")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.nodes[follower].Read(ctx); err != nil {
		t.Fatalf("read at a follower: %v", err)
	}
	if v, _ := c.sms[follower].get("k"); v != "last" {
		t.Fatalf("follower read after k=last (index %d) sees %q", last, v)
	}
	to := c.others(lead)[1]
	if err := c.nodes[lead].TransferLeadership(ctx, to); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	before := counter(t, reg, "canopy_replica_lease_reads_total", lead)
	if err := c.nodes[lead].Read(ctx); err != nil && !isRetryable(err) {
		t.Fatalf("read at the old leader: %v", err)
	}
	if after := counter(t, reg, "canopy_replica_lease_reads_total", lead); after != before {
		t.Fatal("the old leader answered a read under its lease after handing leadership over")
	}
}
