package linearize

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// op builds a returned operation for hand-written histories.
func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func check(t *testing.T, ops []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	res, _ := Check(ops, 10*time.Second)
	return res
}

func TestSequentialSemantics(t *testing.T) {
	w := func(p, d string) Input { return Input{Kind: Write, Path: p, Data: d} }
	ok := []porcupine.Operation{
		op(0, 0, 1, Input{Kind: Create, Path: "/a/x"}, Output{}),
		op(0, 2, 3, Input{Kind: Create, Path: "/a/x"}, Output{Errno: syscall.EEXIST}),
		op(0, 4, 5, w("/a/x", "11111111"), Output{}),
		op(0, 6, 7, Input{Kind: Link, Path: "/a/x", Path2: "/b/y"}, Output{}),
		op(0, 8, 9, Input{Kind: Stat, Path: "/b/y"}, Output{Perm: 0o644, Nlink: 2, Size: 8}),
		op(0, 10, 11, Input{Kind: Rename, Path: "/a/x", Path2: "/b/y"}, Output{}), // one node: no-op
		op(0, 12, 13, Input{Kind: Unlink, Path: "/a/x"}, Output{}),
		op(0, 14, 15, Input{Kind: Read, Path: "/b/y"}, Output{Data: "11111111"}),
		op(0, 16, 17, Input{Kind: Mkdir, Path: "/a/d"}, Output{}),
		op(0, 18, 19, Input{Kind: Rename, Path: "/b/y", Path2: "/a/d"}, Output{Errno: syscall.EISDIR}),
		op(0, 20, 21, Input{Kind: Unlink, Path: "/a/d"}, Output{Errno: syscall.EISDIR}),
		op(0, 22, 23, Input{Kind: Rmdir, Path: "/a/d"}, Output{}),
	}
	if res := check(t, ok); res != porcupine.Ok {
		t.Fatalf("a legal sequential history: %v", res)
	}
	// A read that misses a write which returned before it began.
	stale := []porcupine.Operation{
		op(0, 0, 1, Input{Kind: Create, Path: "/a/x"}, Output{}),
		op(0, 2, 3, w("/a/x", "11111111"), Output{}),
		op(1, 4, 5, Input{Kind: Read, Path: "/a/x"}, Output{Data: ""}),
	}
	if res := check(t, stale); res != porcupine.Illegal {
		t.Fatalf("a stale read: %v, want Illegal", res)
	}
	// The same read overlapping the write is fine.
	stale[2].Call = 2
	if res := check(t, stale); res != porcupine.Ok {
		t.Fatalf("a read concurrent with the write: %v, want Ok", res)
	}
}

// An operation with an unknown outcome may have happened or not.
func TestUnknownOutcomes(t *testing.T) {
	h := NewHistory()
	h.Invoke(0, Input{Kind: Create, Path: "/a/x"}).Return(Output{Unknown: true})
	time.Sleep(time.Millisecond)
	h.Invoke(1, Input{Kind: Stat, Path: "/a/x"}).Return(Output{Errno: syscall.ENOENT})
	h.Invoke(1, Input{Kind: Stat, Path: "/a/x"}).Return(Output{Perm: 0o644, Nlink: 1})
	if res := check(t, h.Operations()); res != porcupine.Ok {
		t.Fatalf("an unknown create seen late: %v", res)
	}
	// But it cannot be undone once seen.
	h.Invoke(1, Input{Kind: Stat, Path: "/a/x"}).Return(Output{Errno: syscall.ENOENT})
	if res := check(t, h.Operations()); res != porcupine.Illegal {
		t.Fatalf("a create seen and then gone: %v, want Illegal", res)
	}
}

// A read whose outcome is unknown is not kept; a write is.
func TestUnknownReadsAreLeftOut(t *testing.T) {
	h := NewHistory()
	h.Invoke(0, Input{Kind: Read, Path: "/a/x"}).Return(Output{Unknown: true})
	h.Invoke(0, Input{Kind: Stat, Path: "/a/x"}).Return(Output{Unknown: true})
	h.Invoke(1, Input{Kind: Write, Path: "/a/x", Data: "1"}).Return(Output{Unknown: true})
	h.Invoke(1, Input{Kind: Stat, Path: "/a/x"}).Return(Output{Errno: syscall.ENOENT})
	ops := h.Operations()
	if len(ops) != 2 || ops[0].Input.(Input).Kind != Write || ops[0].Return != maxReturn || ops[1].Input.(Input).Kind != Stat {
		t.Fatalf("kept %v, want the unknown write (never returning) and the answered stat", ops)
	}
}

func TestPartitionMergesDirectoriesOneOperationJoins(t *testing.T) {
	ops := []porcupine.Operation{
		op(0, 0, 1, Input{Kind: Create, Path: "/a/x"}, Output{}),
		op(0, 0, 1, Input{Kind: Create, Path: "/b/x"}, Output{}),
		op(0, 0, 1, Input{Kind: Create, Path: "/c/x"}, Output{}),
		op(0, 2, 3, Input{Kind: Rename, Path: "/a/x", Path2: "/c/y"}, Output{}),
	}
	parts := partition(ops)
	if len(parts) != 2 || len(parts[0])+len(parts[1]) != 4 {
		t.Fatalf("partitions %v, want {a, c} and {b}", parts)
	}
}

// Concurrent clients against a real server produce a linearizable
// history, and the checker catches one answer changed after the fact.
func TestRealServerHistoryIsLinearizable(t *testing.T) {
	// Operations joining directories merge the history into one part the
	// checker must search whole; fewer clients keep that search to
	// seconds on a loaded machine (its cost grows with concurrency, not
	// length).
	for _, tc := range []struct{ cross, clients int }{{0, 8}, {20, 4}} {
		t.Run(fmt.Sprintf("cross%d", tc.cross), func(t *testing.T) { realServerHistory(t, tc.cross, tc.clients) })
	}
}

func realServerHistory(t *testing.T, cross, clients int) {
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := Workload{Dirs: []string{"/t/d0", "/t/d1", "/t/d2", "/t/d3", "/t/d4", "/t/d5"}, Names: 4, Files: 2, CrossPercent: cross}
	setup, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	if err := w.Setup(ctx, setup); err != nil {
		t.Fatal(err)
	}
	h := NewHistory()
	w.Initial(h)
	const steps = 150
	var wg sync.WaitGroup
	for i := range clients {
		c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), 7))
			for range steps {
				in := w.Next(rng)
				p := h.Invoke(id, in)
				p.Return(Do(ctx, c, in))
			}
		}(i + 1)
	}
	wg.Wait()
	ops := h.Operations()
	for _, op := range ops {
		if op.Output.(Output).Unknown {
			t.Fatalf("an operation with no fault injected has an unknown outcome: %s", describe(op.Input, op.Output))
		}
	}
	res, _ := Check(ops, 30*time.Second)
	if res != porcupine.Ok {
		t.Fatalf("history of %d operations against one server: %v\n%s", len(ops), res, Explain(ops, 30*time.Second))
	}
	// Tamper with a successful read: the history must become illegal.
	for i := range ops {
		in := ops[i].Input.(Input)
		out := ops[i].Output.(Output)
		if in.Kind == Read && out.Errno == 0 && out.Data != "" {
			out.Data = "deadbeef"
			ops[i].Output = out
			if res, _ := Check(ops, 30*time.Second); res != porcupine.Illegal {
				t.Fatalf("a read answer replaced by one never written: %v, want Illegal", res)
			}
			return
		}
	}
	t.Fatal("no read saw data: the workload does not exercise reads")
}
