package router

import (
	"errors"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Calls in flight are bounded per class: a read beyond the bound is
// refused with BUSY at once, while writes, bounded separately, go on; and
// the read goes through once a slot is free. A long poll parked at the
// root partition holds the one read slot.
func TestAdmissionRefusesReadsBeyondTheBound(t *testing.T) {
	ctx := testCtx(t)
	_, a0 := startPartition(t, 0)
	d0 := dial(t, a0)
	update(t, d0, client.TablesUpdate{SetRoutes: []client.Route{{VPart: 0, Addrs: []string{a0}}}})
	r, err := Start(ctx, Config{Listen: "127.0.0.1:0", Root: []string{a0}, MaxReads: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tb, err := d0.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rpc.Dial(r.Addr(), rpc.ClientConfig{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	poll := make(chan error, 1)
	go func() {
		req, _ := proto.Marshal(&pb.TablesRequest{Ino: 1, KnownVersion: tb.Version, WaitMs: 60_000})
		status, _, err := rc.Call(ctx, uint16(pb.Method_TABLES_GET), rpc.Cred{}, req)
		if err == nil && status != 0 {
			err = syscall.Errno(status)
		}
		poll <- err
	}()
	stat, _ := proto.Marshal(&pb.NodeRequest{Path: "/"})
	// Once the poll holds the slot, a stat is refused.
	for r.inflight[rpc.ClassRead].Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, _, err := rc.Call(ctx, uint16(pb.Method_GETATTR), rpc.Cred{}, stat); !errors.Is(err, rpc.ErrBusy) {
		t.Fatalf("stat while the read slot is taken: %v, want ErrBusy", err)
	}
	// Writes have their own bound.
	mk, _ := proto.Marshal(&pb.CreateRequest{Path: "/w", Mode: 0o755})
	if status, _, err := rc.Call(ctx, uint16(pb.Method_MKDIR), rpc.Cred{}, mk); err != nil || status != 0 {
		t.Fatalf("mkdir while reads are full: status %d, %v", status, err)
	}
	// The update wakes the poll, which frees the slot.
	update(t, d0, client.TablesUpdate{SetMounts: []client.MountEntry{{Prefix: "/w", VPart: 0, Target: "/w"}}})
	if err := <-poll; err != nil {
		t.Fatalf("long poll: %v", err)
	}
	if status, _, err := rc.Call(ctx, uint16(pb.Method_GETATTR), rpc.Cred{}, stat); err != nil || status != 0 {
		t.Fatalf("stat after the slot freed: status %d, %v", status, err)
	}
}
