package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

func statusOf(t *testing.T, addr string) statusJSON {
	t.Helper()
	var st statusJSON
	if err := json.Unmarshal([]byte(mustCanopy(t, addr, "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestStatusSingleServer(t *testing.T) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	for i := range 30 {
		if _, err := c.Create(ctx, fmt.Sprintf("/f%d", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WriteFile(ctx, "/data", make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	st := statusOf(t, addr)
	if len(st.Partitions) != 1 || st.Nodes != 32 || st.UsedBytes != 1000 || st.Partitions[0].Nodes != 32 {
		t.Fatalf("status %+v", st)
	}
	p := st.Partitions[0]
	if p.LSN == 0 || p.CheckpointLSN > p.LSN || p.ResidentBytes == 0 || p.BytesPerNode <= 0 || p.Version == "" || p.Dir == "" {
		t.Errorf("partition %+v", p)
	}
	if len(st.Clients) != 0 {
		t.Errorf("clients before any announced or opened: %+v", st.Clients)
	}
	if raw := mustCanopy(t, addr, "status", "--json"); !json.Valid([]byte(raw)) || !contains(raw, `"replication":null`) {
		t.Errorf("no place for replication in %s", raw)
	}

	// A client that announces itself and holds a file open shows, with
	// what it holds; it goes when its session ends.
	other, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Announce(ctx, 0, client.SessionInfo{Host: "h1", PID: 4242, Version: "v-test", Mount: "/mnt/x"}); err != nil {
		t.Fatal(err)
	}
	f, err := other.Open(ctx, "/data")
	if err != nil {
		t.Fatal(err)
	}
	st = statusOf(t, addr)
	if len(st.Clients) != 1 {
		t.Fatalf("clients %+v", st.Clients)
	}
	cl := st.Clients[0]
	if cl.Host != "h1" || cl.PID != 4242 || cl.Version != "v-test" || cl.Mount != "/mnt/x" || cl.OpenFiles != 1 || cl.Since == "" || st.OpenFiles != 1 {
		t.Errorf("client %+v (open files %d)", cl, st.OpenFiles)
	}
	f.Close()
	other.Close()
	waitFor(t, "the departed client to leave the status", func() bool { return len(statusOf(t, addr).Clients) == 0 })

	out := mustCanopy(t, addr, "status")
	if !contains(out, "32 files and directories, 1000 bytes") || !contains(out, "PARTITION") {
		t.Errorf("canopy status:\n%s", out)
	}
}

func TestStatusThroughRouter(t *testing.T) {
	up := startUpArgs(t, "up", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--partitions", "2")
	c, err := client.Dial(up.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, p := range []string{"/a", "/b", "/p1/x", "/p1/y", "/p1/z"} {
		if _, err := c.Create(t.Context(), p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := statusOf(t, up.addr)
	if len(st.Partitions) != 2 {
		t.Fatalf("partitions %+v", st.Partitions)
	}
	// Partition 0: its root, /a, /b; partition 1: its root and 3 files.
	if st.Partitions[0].Nodes != 3 || st.Partitions[1].Nodes != 4 || st.Nodes != 7 {
		t.Errorf("nodes %d + %d = %d", st.Partitions[0].Nodes, st.Partitions[1].Nodes, st.Nodes)
	}
	for _, p := range st.Partitions {
		if len(p.Addrs) == 0 || p.Error != "" {
			t.Errorf("partition %d: addrs %v, error %q", p.Partition, p.Addrs, p.Error)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestStatusRunsAndQuotas runs `canopy up --partitions 2` with a fast
// collector: status shows, per partition, the collector's last pass
// (and what a pass that purged garbage did), fsck's last run once fsck
// has run, and the quota totals once a quota is set and filled.
func TestStatusRunsAndQuotas(t *testing.T) {
	up := startUpArgs(t, "up", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--partitions", "2",
		"--gc-interval", "50ms", "--gc-delay", "1ms")
	c, err := client.Dial(up.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	part := func(st statusJSON, k uint16) partitionStatus {
		for _, p := range st.Partitions {
			if p.Partition == k {
				return p
			}
		}
		t.Fatalf("no partition %d in %+v", k, st.Partitions)
		return partitionStatus{}
	}
	waitFor(t, "the collector's first passes recorded", func() bool {
		st := statusOf(t, up.addr)
		return part(st, 0).Collector != nil && part(st, 1).Collector != nil
	})
	st := statusOf(t, up.addr)
	if p := part(st, 1); p.Fsck != nil || p.Quotas != (quotaStatus{}) || st.Quotas != (quotaStatus{}) {
		t.Fatalf("before any fsck or quota: fsck %+v, quotas %+v, %+v", p.Fsck, p.Quotas, st.Quotas)
	}
	if raw := mustCanopy(t, up.addr, "status", "--json"); !contains(raw, `"fsck_last_run":null`) || !contains(raw, `"collector_last_run":{"time":`) {
		t.Errorf("status --json: %s", raw)
	}

	// Overwritten data is garbage; a later pass purges it and says so.
	// The files are larger than a slice kept inline with its commit, so
	// their objects exist from the start and fsck below finds one (an
	// inline slice has no object until the flusher stores it).
	if err := c.WriteFile(ctx, "/p1/data", bytes.Repeat([]byte("first contents "), 10<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, "/p1/data", bytes.Repeat([]byte("second "), 20<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a pass that purged the overwritten slice", func() bool {
		r := part(statusOf(t, up.addr), 1).Collector
		return r != nil && r.SlicesPurged > 0 && r.ObjectsDeleted > 0 && r.Error == ""
	})
	if r := part(statusOf(t, up.addr), 1).Collector; r.Host == "" || r.Time == "" {
		t.Errorf("collector run %+v", r)
	}

	// fsck records its run on the partition it checked.
	canopy(t, up.addr, "fsck", "--partition", "1") // may find the collector mid-pass; its record is what counts
	st = statusOf(t, up.addr)
	f := part(st, 1).Fsck
	if f == nil || f.Objects == 0 || f.Time == "" || f.Host == "" {
		t.Fatalf("fsck run after canopy fsck: %+v", f)
	}
	if part(st, 0).Fsck != nil {
		t.Errorf("fsck of partition 1 recorded on partition 0: %+v", part(st, 0).Fsck)
	}

	// A quota shows in its partition's totals and the whole's; filled,
	// it is at its limit.
	if err := c.MkdirAll(ctx, "/p1/proj", 0o755); err != nil {
		t.Fatal(err)
	}
	mustCanopy(t, up.addr, "quota", "set", "/p1/proj", "--files", "2", "--bytes", "1MiB")
	st = statusOf(t, up.addr)
	want := quotaStatus{Count: 1, MaxFiles: 2, MaxBytes: 1 << 20}
	if q := part(st, 1).Quotas; q != want || st.Quotas != want {
		t.Fatalf("quotas after quota set: partition %+v, total %+v, want %+v", q, st.Quotas, want)
	}
	for _, p := range []string{"/p1/proj/a", "/p1/proj/b"} {
		if err := c.WriteFile(ctx, p, []byte("1234"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want.Files, want.Bytes, want.AtLimit = 2, 8, 1
	if q := statusOf(t, up.addr).Quotas; q != want {
		t.Fatalf("quotas once full: %+v, want %+v", q, want)
	}
	out := mustCanopy(t, up.addr, "status")
	if !contains(out, "quotas: 1 directories, 2 of 2 nodes") || !contains(out, "collector") || !contains(out, "fsck") {
		t.Errorf("canopy status:\n%s", out)
	}
}
