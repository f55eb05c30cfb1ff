package host

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/server"
)

func testHost(t *testing.T, dir string) *Host {
	t.Helper()
	h, err := Open(Config{Dir: dir, Home: 0, HomeAddr: "127.0.0.1:1", ListenHost: "127.0.0.1",
		Base: server.Config{Logger: slog.New(slog.DiscardHandler), RaftTick: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// waitServing makes a directory in partition p's root at addr, retrying
// while the replica elects itself, and returns its inode number.
func waitServing(t *testing.T, addr string, p uint16, name string) client.Ino {
	t.Helper()
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}, CallTimeout: time.Second, OpTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	fi, err := c.MkdirAt(ctx, client.Ino(protocol.RootIno(p)), name, 0o755)
	if err != nil {
		t.Fatalf("mkdir %s in partition %d at %s: %v", name, p, addr, err)
	}
	return fi.Ino()
}

func TestHostStartsListsStopsAndRestarts(t *testing.T) {
	dir := t.TempDir()
	h := testHost(t, dir)
	defer h.Close()

	for _, bad := range []*pb.HostStartRequest{
		{Partition: 0, Id: 1},       // the process's own
		{Partition: 3, Id: 0},       // no id
		{Partition: 1 << 16, Id: 1}, // beyond the partitions
		{Partition: 3, Id: 1, Others: []*pb.HostPeer{{Id: 1, Addr: "127.0.0.1:9", RaftAddr: "127.0.0.1:9"}}}, // itself
		{Partition: 3, Id: 1, Others: []*pb.HostPeer{{Id: 2}}},                                               // no addresses
	} {
		if _, err := h.StartReplica(bad); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("start %v: %v, want EINVAL", bad, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("refused starts left %v", entries)
	}

	r, err := h.StartReplica(&pb.HostStartRequest{Partition: 3, Id: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Addr == "" || r.RaftAddr == "" || r.Addr == r.RaftAddr {
		t.Fatalf("addresses %q, %q", r.Addr, r.RaftAddr)
	}
	ino := waitServing(t, r.Addr, 3, "a")
	if protocol.PartitionOf(uint64(ino)) != 3 {
		t.Fatalf("inode %d is not partition 3's", ino)
	}
	// Asked again: the same replica; another id of the same partition: refused.
	if again, err := h.StartReplica(&pb.HostStartRequest{Partition: 3, Id: 1}); err != nil || again.Addr != r.Addr {
		t.Fatalf("start again: %v, %v", again, err)
	}
	if _, err := h.StartReplica(&pb.HostStartRequest{Partition: 3, Id: 2}); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("a second replica of one partition: %v", err)
	}
	if l := h.ListReplicas(); l.Home != 0 || l.HomeAddr != "127.0.0.1:1" || len(l.Replicas) != 1 || l.Replicas[0].Addr != r.Addr {
		t.Fatalf("list: %v", l)
	}

	// A new host on the same directory serves it again, on the same port.
	h.Close()
	h = testHost(t, dir)
	defer h.Close()
	if l := h.ListReplicas(); len(l.Replicas) != 1 || l.Replicas[0].Addr != r.Addr || l.Replicas[0].RaftAddr != r.RaftAddr {
		t.Fatalf("list after the restart: %v", l)
	}
	waitServing(t, r.Addr, 3, "b")

	if err := h.StopReplica(&pb.HostStopRequest{Partition: 3, Id: 2}); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("stop another id: %v", err)
	}
	if err := h.StopReplica(&pb.HostStopRequest{Partition: 3, Id: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "p3-r1")); !os.IsNotExist(err) {
		t.Fatalf("the stopped replica's directory: %v", err)
	}
	if l := h.ListReplicas(); len(l.Replicas) != 0 {
		t.Fatalf("list after the stop: %v", l)
	}
	if err := h.StopReplica(&pb.HostStopRequest{Partition: 3, Id: 1}); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("stop twice: %v", err)
	}
}
