package groupfault

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/faults"
	"github.com/canopyfs/canopy/internal/linearize"
)

var long = flag.Bool("faults.long", os.Getenv("CANOPY_FAULTS_LONG") != "",
	"run the long fault test (100 faults) instead of the short one (env CANOPY_FAULTS_LONG)")

// TestGroupUnderFaults runs 8 clients through a router against a group
// of three replica processes while faults are injected one after another
// at random: SIGKILL of the leader or of a follower (restarted after a
// while), SIGSTOP of the leader for longer than an election timeout (then
// SIGCONT), and cuts of replica-to-replica links, one way or both. After
// the last fault heals, the clients' history must be linearizable and
// the replicas must reach the same index with byte-identical states that
// pass the engine's check.
func TestGroupUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; not in -short")
	}
	// Twelve directories, rarely joined by a rename or link, and a fresh
	// set of them after every fault (an epoch): the checker's work grows
	// fast with the operations of one part of the history (the sets of
	// directories no operation joins), above all with the operations
	// whose outcome is unknown, which stay open to the end. Operations of
	// different epochs never share a directory, so each part holds one
	// epoch's operations at most, however long the run.
	nFaults, checkTime := 5, 2*time.Minute
	epoch := func(k int) *linearize.Workload {
		w := &linearize.Workload{Names: 4, Files: 2, CrossPercent: 2}
		for d := range 12 {
			w.Dirs = append(w.Dirs, fmt.Sprintf("/t/e%d/d%d", k, d))
		}
		return w
	}
	pause := 40 * time.Millisecond
	if *long {
		nFaults, checkTime, pause = 100, 15*time.Minute, 10*time.Millisecond
	}
	const tick = 50 * time.Millisecond // election timeout 500 ms to 1 s
	c := newCluster(t, 3, tick)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	setup, err := client.Dial(c.router.Addr(), client.Options{Cred: &client.Cred{}, OpTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	h := linearize.NewHistory()
	var cur atomic.Pointer[linearize.Workload] // the epoch the clients work in
	begin := func(k int) {
		w := epoch(k)
		if err := w.Setup(ctx, setup); err != nil {
			t.Fatalf("epoch %d: %v", k, err)
		}
		w.Initial(h)
		cur.Store(w)
	}
	begin(0)

	const clients = 8
	var wg sync.WaitGroup
	var done, acked, unknown atomic.Int64
	stop := make(chan struct{})
	for i := range clients {
		cl, err := client.Dial(c.router.Addr(), client.Options{Cred: &client.Cred{}, OpTimeout: 8 * time.Second,
			CallTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-stop:
					return
				default:
				}
				in := cur.Load().Next(rng)
				p := h.Invoke(id, in)
				out := linearize.Do(ctx, cl, in)
				p.Return(out)
				done.Add(1)
				if out.Unknown {
					unknown.Add(1)
				} else {
					acked.Add(1)
				}
				// Pace the clients: the checker's work grows fast with
				// the operations that overlap. The short run keeps its
				// history to a few hundred operations per fault, so
				// that it is decided in seconds on a loaded machine.
				time.Sleep(pause + time.Duration(rng.IntN(20))*time.Millisecond)
			}
		}(i + 1)
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kinds := map[string]int{}
	for f := range nFaults {
		time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
		lead := c.waitLeader(20 * time.Second)
		others := []int{(lead + 1) % 3, (lead + 2) % 3}
		hold := time.Duration(1200+rng.IntN(800)) * time.Millisecond
		var kind string
		switch rng.IntN(6) {
		case 0:
			kind = "kill leader"
			c.kill(lead)
			time.Sleep(hold)
			c.start(lead)
		case 1:
			kind = "kill follower"
			v := others[rng.IntN(2)]
			c.kill(v)
			time.Sleep(hold)
			c.start(v)
		case 2:
			kind = "stop leader"
			c.signal(lead, syscall.SIGSTOP)
			time.Sleep(hold)
			c.signal(lead, syscall.SIGCONT)
		case 3:
			kind = "isolate leader"
			for _, o := range others {
				c.links[lead][o].Partition()
				c.links[o][lead].Partition()
			}
			time.Sleep(hold)
			c.heal()
		case 4:
			kind = "leader cannot send"
			for _, o := range others {
				c.links[lead][o].Block(faults.Forward)
			}
			time.Sleep(hold)
			c.heal()
		case 5:
			kind = "follower cannot send"
			v := others[rng.IntN(2)]
			for j := range 3 {
				if j != v {
					c.links[v][j].Block(faults.Forward)
				}
			}
			time.Sleep(hold)
			c.heal()
		}
		kinds[kind]++
		t.Logf("fault %d: %s (replica %d led), %d operations so far", f+1, kind, lead+1, done.Load())
		begin(f + 1)
	}
	c.heal()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("faults: %v; %d operations, %d with an answer, %d with an unknown outcome", kinds, done.Load(), acked.Load(), unknown.Load())
	if acked.Load() < int64(nFaults)*10 {
		t.Fatalf("only %d operations answered: the group hardly served", acked.Load())
	}

	ops := h.Operations()
	start := time.Now()
	res, _ := linearize.Check(ops, checkTime)
	switch res {
	case porcupine.Ok:
		t.Logf("history of %d operations is linearizable (checked in %v)", len(ops), time.Since(start).Round(time.Millisecond))
	case porcupine.Unknown:
		t.Errorf("the checker ran out of time (%v) on %d operations: linearizability not decided", checkTime, len(ops))
	default:
		t.Fatalf("history of %d operations is not linearizable:\n%s", len(ops), linearize.Explain(ops, checkTime))
	}
	c.converge(30 * time.Second)
}
