package replica

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	regs := map[uint64]*prometheus.Registry{}
	c := newCluster(t, 3, func(cfg *Config) {
		regs[cfg.ID] = prometheus.NewRegistry()
		cfg.Registerer = regs[cfg.ID]
		cfg.SnapshotEntries = 20
	})
	var last uint64
	for range 30 {
		last = c.put("k", "v")
	}
	lead := c.leader()
	c.waitApplied(lead, last)
	n := c.nodes[lead]
	if got := testutil.ToFloat64(n.m.proposals); got < 30 {
		t.Errorf("proposals %v, want at least 30", got)
	}
	if got := testutil.ToFloat64(n.m.term); got < 2 {
		t.Errorf("term gauge %v, want the term of an elected leader", got)
	}
	if got := testutil.ToFloat64(n.m.leaderChanges); got < 1 {
		t.Errorf("leader changes %v", got)
	}
	// The leader updates the lag of each follower on its ticks.
	waitFor(t, 5*time.Second, "follower lag series", func() bool { return testutil.CollectAndCount(n.m.followerLag) == 2 })
	names := map[string]bool{}
	mfs, err := regs[lead].Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetName() == "canopy_replica_append_sync_seconds" && mf.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
			t.Error("no append+fsync observed")
		}
		if mf.GetName() == "canopy_replica_fsync_seconds" && mf.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
			t.Error("no fsync observed")
		}
		if mf.GetName() == "canopy_replica_snapshot_bytes" && mf.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
			t.Error("no snapshot size observed after SnapshotEntries entries")
		}
	}
	for _, want := range []string{"canopy_replica_term", "canopy_replica_commit_seconds", "canopy_replica_entries_per_append",
		"canopy_replica_snapshot_seconds", "canopy_replica_follower_lag_entries"} {
		if !names[want] {
			t.Errorf("metric %s not exported", want)
		}
	}
}
