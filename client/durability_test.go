package client_test

import (
	"context"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// A client in the POSIX mode sees its changes at once, as do others;
// File.Sync and Client.Sync each wait for a log fsync on the server.
func TestDurabilityPOSIX(t *testing.T) {
	objects := t.TempDir()
	if _, err := object.NewLocal(objects); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, addr := servertest.Start(t, server.Config{Storage: "file://" + objects, Metrics: reg})
	ctx := context.Background()
	c, err := client.Dial(addr, client.Options{Durability: client.DurabilityPOSIX})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	if _, err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenFile(ctx, "/d/f", os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats().Syncs
	callsBefore := servertest.CallsByMethod(t, reg)
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if after := srv.Stats().Syncs; after <= before {
		t.Fatalf("File.Sync returned with %d log syncs, %d before it", after, before)
	}
	// The commit of the writes is itself answered once durable: no SYNC
	// after it. With nothing to commit, File.Sync asks for a SYNC.
	calls := servertest.CallsByMethod(t, reg)
	if calls["commit"]-callsBefore["commit"] != 1 || calls["sync"] != callsBefore["sync"] {
		t.Fatalf("File.Sync of written data called commit %v times and sync %v times, want 1 and 0",
			calls["commit"]-callsBefore["commit"], calls["sync"]-callsBefore["sync"])
	}
	before = srv.Stats().Syncs
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if after := servertest.CallsByMethod(t, reg); after["sync"]-calls["sync"] != 1 || after["commit"] != calls["commit"] {
		t.Fatalf("File.Sync with nothing to commit called sync %v times and commit %v times, want 1 and 0",
			after["sync"]-calls["sync"], after["commit"]-calls["commit"])
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if data, err := other.ReadFile(ctx, "/d/f"); err != nil || string(data) != "hello" {
		t.Fatalf("another client reads %q, %v", data, err)
	}
	if _, err := c.Mkdir(ctx, "/d/e", 0o755); err != nil {
		t.Fatal(err)
	}
	before = srv.Stats().Syncs
	if err := c.Sync(ctx); err != nil {
		t.Fatalf("Client.Sync: %v", err)
	}
	if after := srv.Stats().Syncs; after <= before {
		t.Fatalf("Client.Sync returned with %d log syncs, %d before it", after, before)
	}
	// Nothing changed since: a strict client's Sync, and this one's, have
	// nothing to wait for.
	if err := other.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestParseDurability(t *testing.T) {
	for _, d := range []client.Durability{client.DurabilityStrict, client.DurabilityPOSIX} {
		got, err := client.ParseDurability(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDurability(%q) = %v, %v", d, got, err)
		}
	}
	if _, err := client.ParseDurability("fast"); err == nil {
		t.Error("ParseDurability accepted fast")
	}
}
