package server

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// retriedCall sends req through a proxy that loses the first reply after
// the server applied the call; the client retries the same call, with the
// server kept running, restarted, or restarted after checkpoints newer
// than the call (so its outcome comes from a checkpoint's retry cache).
// prepare runs on the server first; it returns the server (still running,
// for inspection) and the retried call's status and reply.
func retriedCall(t *testing.T, mode string, prepare func(c *rawClient), m pb.Method, req func() proto.Message) (*Server, Config, string, uint32, []byte) {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)}
	if mode == "restarted-after-checkpoints" {
		cfg.CheckpointEvery = 1
	}
	srv, addr := openAndServe(t, cfg)
	prepare(dialRaw(t, addr))
	proxy := newReplyDropper(t, addr)
	c, err := rpc.Dial(proxy.ln.Addr().String(), rpc.ClientConfig{
		CallTimeout: 10 * time.Second, OpTimeout: 20 * time.Second, MaxRetries: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	data, _ := proto.Marshal(req())
	type result struct {
		status uint32
		reply  []byte
		err    error
	}
	done := make(chan result, 1)
	go func() {
		st, rep, err := c.Call(context.Background(), uint16(m), rpc.Cred{}, data)
		done <- result{st, rep, err}
	}()
	select {
	case <-proxy.dropped:
	case <-time.After(10 * time.Second):
		t.Fatal("the reply was never dropped")
	}
	if mode == "restarted-after-checkpoints" {
		callLSN := srv.Status().LSN // the reply left after the call's record was synced
		other := dialRaw(t, addr)
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; ; i++ {
			other.must(pb.Method_MKDIR, &pb.CreateRequest{Path: fmt.Sprintf("/ck%d", i), Mode: 0o755}, nil)
			if lsn, body, ok, err := wal.OpenCheckpoint(vfs.Default, dir); ok && err == nil {
				body.Close()
				if lsn >= callLSN {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("no checkpoint after the call's record within 20s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		other.c.Close()
	}
	if mode != "same-server" {
		srv.Close()
		srv, addr = openAndServe(t, cfg)
		proxy.backend.Store(addr)
	}
	proxy.releaseHeld()
	r := <-done
	if r.err != nil {
		t.Fatalf("retried %s: %v", m, r.err)
	}
	if hits := srv.Stats().RetryHits; hits != 1 {
		t.Errorf("retry-cache hits %d, want 1", hits)
	}
	return srv, cfg, addr, r.status, r.reply
}

var retryModes = []string{"same-server", "restarted-server", "restarted-after-checkpoints"}

// A retried ALLOC_SLICES gets the ids of its first attempt, and later
// allocations do not hand them out again.
func TestRetriedAllocSlicesAppliedOnce(t *testing.T) {
	for _, mode := range retryModes {
		t.Run(mode, func(t *testing.T) {
			_, _, addr, st, rep := retriedCall(t, mode, func(*rawClient) {}, pb.Method_ALLOC_SLICES,
				func() proto.Message { return &pb.AllocSlicesRequest{Ino: 1, Count: 10} })
			var first pb.AllocSlicesReply
			if err := proto.Unmarshal(rep, &first); st != 0 || err != nil || first.Count != 10 {
				t.Fatalf("retried alloc: status %d %v %v", st, &first, err)
			}
			if first.First != engine.MakeSliceID(0, 1) {
				t.Fatalf("retried alloc got ids from %d, want the first attempt's %d", first.First, engine.MakeSliceID(0, 1))
			}
			c := dialRaw(t, addr)
			var next pb.AllocSlicesReply
			c.must(pb.Method_ALLOC_SLICES, &pb.AllocSlicesRequest{Ino: 1, Count: 1}, &next)
			if next.First != first.First+10 {
				t.Fatalf("next alloc from %d, want %d", next.First, first.First+10)
			}
		})
	}
}

// A retried COMMIT succeeds with its first outcome instead of failing on
// the id it used up, and the slice is placed once.
func TestRetriedCommitAppliedOnce(t *testing.T) {
	for _, mode := range retryModes {
		t.Run(mode, func(t *testing.T) {
			var ino, id uint64
			prepare := func(c *rawClient) {
				ino = c.create("/f")
				var al pb.AllocSlicesReply
				c.must(pb.Method_ALLOC_SLICES, &pb.AllocSlicesRequest{Ino: ino, Count: 1}, &al)
				id = al.First
			}
			srv, cfg, _, st, rep := retriedCall(t, mode, prepare, pb.Method_COMMIT, func() proto.Message {
				return &pb.CommitRequest{Ino: ino, Size: 5000, Writes: []*pb.SliceWrite{{Slice: &pb.Slice{Id: id, Size: 100, Len: 100, Pos: 10}}}}
			})
			var a pb.AttrReply
			if err := proto.Unmarshal(rep, &a); st != 0 || err != nil || a.Attr.GetSize() != 5000 {
				t.Fatalf("retried commit: status %d %v %v", st, &a, err)
			}
			srv.Close()
			r, err := recoverOffline(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r.wal.Close()
			used, _ := r.eng.ListSlices(0, 0)
			if len(used) != 1 || used[0].ID != id {
				t.Fatalf("slices in use %v, want just %d", used, id)
			}
			_, views, _ := r.eng.ReadChunks(engine.Ino(ino), 0, 1)
			if len(views) != 1 || views[0].Stored != 1 {
				t.Fatalf("views %v", views)
			}
		})
	}
}
