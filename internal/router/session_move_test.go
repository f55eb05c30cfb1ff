package router

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/faults"
	metaserver "github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// TestSessionSurvivesRouterMove: a client reaches partition 1 through
// router A (behind a proxy, to cut its connection) with B as its second
// address, holds a lock there and an open unlinked file, and is cut off
// from A, which stays up: it goes on through B. A ends the client's
// session as the client left it, but the partition, which heard the
// client through B since, keeps it: the lock is still the client's and
// the file's space stays in use, and the client is not told it lost its
// lock. Once the client closes, B ends the session: another client
// takes the lock and the space is freed.
func TestSessionSurvivesRouterMove(t *testing.T) {
	store := "file://" + t.TempDir()
	_, root := servertest.Start(t, metaserver.Config{Partition: 0, Storage: store})
	_, part1 := servertest.Start(t, metaserver.Config{Partition: 1, Storage: store})
	src := newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/p1", Vpart: 1, Target: "/"},
	}, map[uint32][]string{0: {root}, 1: {part1}})
	ra := startRouter(t, src, Config{Root: []string{root}})
	rb := startRouter(t, src, Config{Root: []string{root}})
	proxy, err := faults.NewProxy(ra.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	direct := dial(t, part1)
	other := dial(t, rb.Addr())

	var lost atomic.Int64
	mover, err := client.Dial(proxy.Addr()+","+rb.Addr(), client.Options{Cred: &client.Cred{},
		OnLocksLost: func(client.Ino) { lost.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer mover.Close()
	ctx := testCtx(t)
	f, err := mover.OpenFile(ctx, "/p1/held", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	ino := f.Ino()
	want := client.Lock{Type: client.WriteLock, End: client.LockEOF, Pid: 42}
	if err := mover.SetLk(ctx, ino, 1, want); err != nil {
		t.Fatal(err)
	}
	if err := mover.Unlink(ctx, "/p1/held"); err != nil {
		t.Fatal(err)
	}
	used, _ := sliceSets(t, direct)
	if len(used) == 0 {
		t.Fatal("no slices in use before the move")
	}
	if ra.sessionEnds.Load() != 0 {
		t.Fatal("router A ended a session before the move")
	}

	proxy.Close() // A stays up; the client's connection to it is gone
	deadline := time.Now().Add(bound)
	for ra.sessionEnds.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("router A never ended the session of the client that left it")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := other.SetLk(ctx, ino, 7, want); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("another client's lock after the move: %v, want EAGAIN (the mover holds it)", err)
	}
	inUse, garbage := sliceSets(t, direct)
	for id := range used {
		if !inUse[id] || garbage[id] {
			t.Fatalf("after the move slice %d: in use %v, garbage %v; want in use (the file is open)", id, inUse[id], garbage[id])
		}
	}
	hb, err := mover.Heartbeat(ctx, ino)
	if err != nil || hb.Locks != 1 || hb.LocksLost {
		t.Fatalf("the mover's heartbeat through B: %+v, %v; want its one lock", hb, err)
	}
	if _, err := f.Write([]byte("more")); err != nil {
		t.Fatalf("the mover's open file after the move: %v", err)
	}
	if n := lost.Load(); n != 0 {
		t.Fatalf("the mover was told %d times it lost its lock", n)
	}

	mover.Close()
	closed := time.Now()
	for {
		err := other.SetLk(ctx, ino, 7, want)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EAGAIN) || time.Since(closed) > bound {
			t.Fatalf("another client's lock after the mover closed: %v (%v after)", err, time.Since(closed))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("lock taken %v after the mover closed", time.Since(closed).Round(time.Millisecond))
	waitFreed(t, direct, used, closed, "the mover's file's")
}
