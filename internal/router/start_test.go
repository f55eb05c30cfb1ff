package router

import (
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
)

// A router pointed at a partition that keeps no tables does not start; nor
// does one without a root.
func TestStartNeedsTheRootPartition(t *testing.T) {
	_, a1 := startPartition(t, 1)
	r, err := Start(testCtx(t), Config{Listen: "127.0.0.1:0", Root: []string{a1}, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		r.Close()
		t.Fatal("router started against partition 1")
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		t.Fatalf("start against partition 1: %v, want the partition's errno", err)
	}
	if _, err := Start(testCtx(t), Config{Listen: "127.0.0.1:0"}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("start without a root: %v, want EINVAL", err)
	}
}

// A router in front of a fresh root partition serves its namespace at once,
// with no route set for virtual partition 0; a mount entry whose virtual
// partition has no route fails at once with ENXIO naming it, never BUSY.
func TestRouterServesAFreshRootWithoutRoutes(t *testing.T) {
	_, root := startPartition(t, 0)
	r, err := Start(testCtx(t), Config{Listen: "127.0.0.1:0", Root: []string{root}, Logger: slog.New(slog.DiscardHandler), TablesWait: time.Second})
	if err != nil {
		t.Fatalf("start router: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	ctx := testCtx(t)
	c := dial(t, r.Addr())
	if _, err := c.Mkdir(ctx, "/fresh", 0o755); err != nil {
		t.Fatalf("mkdir through a router in front of a fresh root: %v", err)
	}
	if fi, err := c.Stat(ctx, "/fresh"); err != nil || !fi.IsDir() {
		t.Fatalf("stat /fresh: %v, %v", fi, err)
	}
	tb, err := c.UpdateTables(ctx, client.TablesUpdate{SetMounts: []client.MountEntry{{Prefix: "/nowhere", VPart: 9, Target: "/"}}})
	if err != nil {
		t.Fatalf("mount /nowhere: %v", err)
	}
	waitVersion(t, tb.Version, r)
	_, err = c.Stat(ctx, "/nowhere/x")
	if !errors.Is(err, syscall.ENXIO) {
		t.Fatalf("stat under an unrouted mount: %v, want ENXIO", err)
	}
	if !strings.Contains(err.Error(), "virtual partition 9") {
		t.Errorf("error %q does not name the partition", err)
	}
	// The router's own answer, before any retry: ENXIO with the detail,
	// not BUSY.
	status, out := rawCall(t, r.Addr(), pb.Method_GETATTR, &pb.NodeRequest{Path: "/nowhere/x"})
	var detail pb.ErrorDetail
	if status != uint32(syscall.ENXIO) || proto.Unmarshal(out, &detail) != nil || !strings.Contains(detail.Message, "canopy routing set 9") {
		t.Fatalf("raw getattr under an unrouted mount: status %d, detail %q; want ENXIO saying how to route it", status, detail.Message)
	}
}
