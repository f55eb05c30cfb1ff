package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/testaddr"
)

// TestReplicatedCatchUp: a replica of a group holding `files` files
// (CANOPY_CATCHUP_FILES, default 2,000; the measurement in
// docs/BENCHMARKS.md uses 1,000,000) is stopped and its directory wiped;
// it is removed from the group and comes back, empty, as a new member
// (GROUP_ADD), which catches up from a snapshot as a learner and is
// promoted. The test logs the time from its start to its promotion, checks
// that its state is byte-identical to the leader's at the same index, and
// that it serves as a voter: with the other original replica stopped, the
// group still commits.
func TestReplicatedCatchUp(t *testing.T) {
	files := 2000
	if s := os.Getenv("CANOPY_CATCHUP_FILES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CANOPY_CATCHUP_FILES=%q: want a positive number", s)
		}
		files = n
	}
	// Snapshots every fifth of the fill: the log no longer reaches back
	// to the start, and the fill does not spend its time in snapshots.
	g := newGroupSnap(t, 3, uint64(max(files/5, 100)))
	lead := g.leader()
	ctx := context.Background()
	start := time.Now()
	fill(t, g.peers[lead].Addr, files)
	fillTime := time.Since(start)
	t.Logf("filled %d files in %v (%.0f creates/s)", files, fillTime.Round(time.Millisecond), float64(files)/fillTime.Seconds())

	lead = g.leader()
	victim := (lead + 1) % 3
	other := 3 - lead - victim
	g.stop(victim)
	if err := os.RemoveAll(g.dirs[victim]); err != nil {
		t.Fatal(err)
	}
	orig := []string{g.peers[0].Addr, g.peers[1].Addr, g.peers[2].Addr}
	groupChange(t, orig, pb.Method_GROUP_REMOVE, &pb.GroupRemoveRequest{Id: g.peers[victim].ID})

	// Back, empty, as replica 4 in the wiped directory.
	g.peers = append(g.peers, Peer{ID: 4, Addr: testaddr.Free(t), RaftAddr: testaddr.Free(t)})
	g.dirs = append(g.dirs, g.dirs[victim])
	g.srvs = append(g.srvs, nil)
	t0 := time.Now()
	g.startJoin(3)
	gr := groupChange(t, orig, pb.Method_GROUP_ADD, &pb.GroupAddRequest{Id: 4, Addr: g.peers[3].Addr, RaftAddr: g.peers[3].RaftAddr})
	took := time.Since(t0)
	if m := member(gr, 4); m == nil || m.Learner {
		t.Fatalf("after GROUP_ADD: members %v", gr.Members)
	}
	st, err := g.srvs[3].Group(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Snapshot == 0 {
		t.Fatal("the new replica holds no snapshot: it did not catch up from one")
	}
	var snapBytes int64
	if names, err := filepath.Glob(filepath.Join(g.dirs[3], "raft", "checkpoint-*")); err == nil {
		for _, n := range names {
			if fi, err := os.Stat(n); err == nil {
				snapBytes = max(snapBytes, fi.Size())
			}
		}
	}
	t.Logf("replica wiped and added back: voter after %v (snapshot at index %d, %.1f MB; %d files)",
		took.Round(time.Millisecond), st.Snapshot, float64(snapBytes)/1e6, files)
	lead = g.leader()
	g.waitSame(lead, 3)
	// It votes: with the other original replica stopped, 2 of 3 voters.
	g.stop(other)
	cl := dial(t, g.peers[lead].Addr, client.Cred{})
	if _, err := cl.Create(ctx, "/after-catch-up", 0o644); err != nil {
		t.Fatalf("create with the caught-up replica as the only other voter: %v", err)
	}
	if _, err := cl.Stat(ctx, fmt.Sprintf("/d%d/f%d", (files-1)%dirsFor(files), files-1)); err != nil {
		t.Fatalf("stat of the last file filled: %v", err)
	}
}

// dirsFor is the number of directories fill spreads files over.
func dirsFor(files int) int { return max(1, files/1000) }

// fill creates files files, spread over dirsFor(files) directories /dK
// (file i in /d<i mod dirs>/f<i>), through 32 concurrent callers on 4
// connections to addr.
func fill(t *testing.T, addr string, files int) {
	t.Helper()
	ctx := context.Background()
	const conns, workers = 4, 32
	cls := make([]*client.Client, conns)
	for i := range cls {
		cls[i] = dial(t, addr, client.Cred{})
	}
	dirs := dirsFor(files)
	for k := range dirs {
		if _, err := cls[0].Mkdir(ctx, fmt.Sprintf("/d%d", k), 0o755); err != nil {
			t.Fatalf("mkdir: %v", err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := cls[w%conns]
			for i := w; i < files; i += workers {
				if _, err := cl.Create(ctx, fmt.Sprintf("/d%d/f%d", i%dirs, i), 0o644); err != nil {
					errs <- fmt.Errorf("create %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	var msgs []string
	for err := range errs {
		msgs = append(msgs, err.Error())
	}
	if len(msgs) > 0 {
		t.Fatal(strings.Join(msgs, "; "))
	}
}
