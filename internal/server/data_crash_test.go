package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// dataWorker allocates slice ids and commits them to its own file, each
// slice 100 bytes at its own offset, and remembers what was acknowledged:
// after a crash the file must show every acknowledged slice where it was
// put, and the slice in flight at most.
type dataWorker struct {
	id      int
	ino     uint64
	acked   map[uint64]uint64 // slice id -> file offset
	pending map[uint64]uint64 // the commit in flight at the crash
	maxID   uint64            // the end of the last acknowledged allocation
	free    []uint64          // allocated ids not used yet
	nextOff uint64
	commits int
}

func (w *dataWorker) call(c *rpc.Client, m pb.Method, req, reply proto.Message) (uint32, error) {
	data, _ := proto.Marshal(req)
	st, rep, err := c.Call(context.Background(), uint16(m), rpc.Cred{}, data)
	if err == nil && st == 0 && reply != nil {
		err = proto.Unmarshal(rep, reply)
	}
	return st, err
}

// run commits until the server dies or stop closes. A status from the
// server is a failure of the test; a transport error is the crash.
func (w *dataWorker) run(addr string, stop <-chan struct{}) error {
	c, err := rpc.Dial(addr, rpc.ClientConfig{CallTimeout: time.Second, OpTimeout: 2 * time.Second, MaxRetries: 2})
	if err != nil {
		return nil
	}
	defer c.Close()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if len(w.free) == 0 {
			var al pb.AllocSlicesReply
			st, err := w.call(c, pb.Method_ALLOC_SLICES, &pb.AllocSlicesRequest{Ino: w.ino, Count: 3}, &al)
			if err != nil {
				return nil
			}
			if st != 0 || al.Count != 3 || al.First < w.maxID {
				return fmt.Errorf("worker %d: alloc: status %d, %d ids from %d, after %d", w.id, st, al.Count, al.First, w.maxID)
			}
			w.maxID = al.First + 3
			w.free = []uint64{al.First, al.First + 1, al.First + 2}
		}
		// One or two slices per commit.
		k := 1 + int(w.nextOff/100)%2
		k = min(k, len(w.free))
		req := &pb.CommitRequest{Ino: w.ino}
		batch := map[uint64]uint64{}
		for _, id := range w.free[:k] {
			req.Writes = append(req.Writes, &pb.SliceWrite{Slice: &pb.Slice{Id: id, Size: 100, Len: 100, Pos: uint32(w.nextOff)}})
			batch[id] = w.nextOff
			w.nextOff += 100
		}
		w.free = w.free[k:]
		st, err := w.call(c, pb.Method_COMMIT, req, nil)
		if err != nil {
			w.pending = batch
			return nil
		}
		if st != 0 {
			return fmt.Errorf("worker %d: commit: status %d", w.id, st)
		}
		for id, off := range batch {
			w.acked[id] = off
		}
		w.commits++
	}
}

// check reads the file's chunk 0 and compares it with the acknowledged
// slices, allowing the commit in flight to be there or not. Ids left
// unused by a crash are dropped: the worker allocates new ones.
func (w *dataWorker) check(c *rpc.Client) error {
	var rc pb.ReadChunksReply
	if st, err := w.call(c, pb.Method_READ_CHUNKS, &pb.ReadChunksRequest{Ino: w.ino}, &rc); st != 0 || err != nil {
		return fmt.Errorf("worker %d: read chunks: %d %v", w.id, st, err)
	}
	got := map[uint64]uint64{}
	for _, ch := range rc.Chunks {
		for _, s := range ch.Slices {
			if s.Id != 0 {
				got[s.Id] = uint64(s.Pos)
			}
		}
	}
	for id, off := range w.acked {
		if gotOff, ok := got[id]; !ok || gotOff != off {
			return fmt.Errorf("worker %d: acknowledged slice %d at %d is missing", w.id, id, off)
		}
	}
	applied := 0
	for id, off := range w.pending {
		if gotOff, ok := got[id]; ok && gotOff == off {
			applied++
		}
	}
	if applied != 0 && applied != len(w.pending) {
		return fmt.Errorf("worker %d: the commit in flight is half applied: %d of %d slices", w.id, applied, len(w.pending))
	}
	if len(got) != len(w.acked)+applied {
		return fmt.Errorf("worker %d: %d slices, want %d acknowledged + %d in flight", w.id, len(got), len(w.acked), applied)
	}
	if applied > 0 {
		for id, off := range w.pending {
			w.acked[id] = off
		}
	}
	w.pending, w.free = nil, nil
	return nil
}

// TestCrashRecoversAcknowledgedCommits kills a child server under
// allocate-and-commit load from 3 clients and restarts it: every
// acknowledged commit survives, the commit in flight is all or nothing,
// and no allocation after the restart hands out an id handed out before.
func TestCrashRecoversAcknowledgedCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server 8 times")
	}
	const cycles, workers = 8, 3
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	child := startCrashChild(t, dir)
	setup := dialRaw(t, child.addr)
	ws := make([]*dataWorker, workers)
	for i := range ws {
		ws[i] = &dataWorker{id: i, ino: setup.create(fmt.Sprintf("/data%d", i)), acked: map[uint64]uint64{}}
	}
	setup.c.Close()
	for cycle := range cycles {
		child = loadAndKill(t, cycle, child, dir, ws, rng)
		c, err := rpc.Dial(child.addr, rpc.ClientConfig{CallTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if err := w.check(c); err != nil {
				c.Close()
				child.kill()
				t.Fatalf("cycle %d: %v", cycle, err)
			}
		}
		c.Close()
	}
	child.kill()
	commits := 0
	for _, w := range ws {
		commits += w.commits
	}
	t.Logf("%d commits acknowledged over %d crashes", commits, cycles)
	if commits < cycles {
		t.Fatalf("only %d commits acknowledged: the load did not run", commits)
	}
}
