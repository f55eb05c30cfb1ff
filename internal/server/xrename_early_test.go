package server

import (
	"errors"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/vfs"
)

// TestEarlySourcePrepareAndCrash: a router sends the source's prepare of
// a rename across partitions marked early, so it is answered before it
// is durable. A crash that loses it leaves the node where it was and the
// decision refused (ETIMEDOUT: no intent), so the router aborts; a
// decision that was answered is durable, and so is the prepare logged
// before it. The crash images keep only what the log synced.
func TestEarlySourcePrepareAndCrash(t *testing.T) {
	mem := vfs.NewMem()
	const pause = 3 * time.Second // early records wait this long for their sync
	srv, addr := openAndServe(t, Config{Dir: "/meta", FS: mem, EarlySyncPause: pause})
	c := dialRaw(t, addr)
	c.create("/a")
	c.create("/b")
	early := func(m pb.Method, req proto.Message) {
		t.Helper()
		data, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		st, _, err := c.c.CallMarked(t.Context(), uint16(m), rpc.Cred{}, data, rpc.MarkEarly)
		if err != nil || st != 0 {
			t.Fatalf("%s: status %d, %v", m, st, err)
		}
	}
	// The syncer syncs the first early record at once and the next ones
	// a pause after it: start the pause.
	syncs := srv.Stats().Syncs
	early(pb.Method_MKNOD, &pb.CreateRequest{Path: "/warm", Mode: engine.S_IFREG | 0o644})
	for deadline := time.Now().Add(10 * time.Second); srv.Stats().Syncs == syncs; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first early record was not synced")
		}
	}
	began := time.Now()
	id1, id2 := make([]byte, 16), make([]byte, 16)
	id1[0], id2[0] = 1, 2
	early(pb.Method_XRENAME_PREPARE_SRC, &pb.XPrepareRequest{Path: "/a", Id: id1, Peer: 1})
	lost := mem.Crash()
	if time.Since(began) > pause/2 {
		t.Skip("the machine stalled past the sync pause: the image may hold the prepare")
	}
	early(pb.Method_XRENAME_PREPARE_SRC, &pb.XPrepareRequest{Path: "/b", Id: id2, Peer: 1})
	c.must(pb.Method_XRENAME_COMMIT_SRC, &pb.XIntentRequest{Ino: 1, Id: id2}, nil) // not early: durable
	decided := mem.Crash()

	r, err := recoverOffline(Config{Dir: "/meta", FS: lost, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var x1, x2 engine.XID
	copy(x1[:], id1)
	copy(x2[:], id2)
	if st := r.eng.IntentState(x1); st != engine.XNone {
		t.Fatalf("the early prepare survived a crash before its sync: state %d", st)
	}
	if _, err := r.eng.XCommitSource(x1, nil, nil, 1); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("a decision after the lost prepare: %v, want ETIMEDOUT", err)
	}
	if _, err := r.eng.Resolve(engine.Root, "/a", false); err != nil {
		t.Fatalf("/a after the lost prepare: %v", err)
	}
	r.wal.Close()

	r, err = recoverOffline(Config{Dir: "/meta", FS: decided, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.wal.Close()
	if st := r.eng.IntentState(x2); st != engine.XCommitted {
		t.Fatalf("after an answered decision the intent is in state %d, want committed", st)
	}
	if _, err := r.eng.Resolve(engine.Root, "/b", false); err == nil {
		t.Fatal("/b still names its node after the decision")
	}
}
