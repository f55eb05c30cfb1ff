package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/wal"
)

// others returns the replicas of c other than id.
func (c *cluster) others(id uint64) []uint64 {
	var out []uint64
	for _, p := range c.peers {
		if p != id {
			if _, ok := c.nodes[p]; ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// checkAll checks that every running replica holds key=value for every
// key in want, once it has applied index.
func (c *cluster) checkAll(index uint64, want map[string]string) {
	c.t.Helper()
	for id := range c.nodes {
		c.waitApplied(id, index)
		for k, v := range want {
			if got, _ := c.sms[id].get(k); got != v {
				c.t.Fatalf("replica %d: %s = %q, want %q", id, k, got, v)
			}
		}
	}
}

func TestLeaderKilledAndRestartedFromItsDisk(t *testing.T) {
	t.Run("log only", func(t *testing.T) { killLeaders(t, nil) })
	// With snapshots every 15 entries the restarts recover from a
	// snapshot and a truncated log, and a replica that was down long
	// enough catches up from a snapshot.
	t.Run("snapshots", func(t *testing.T) {
		killLeaders(t, func(cfg *Config) { cfg.SnapshotEntries, cfg.CatchUpEntries = 15, 5 })
	})
}

func killLeaders(t *testing.T, tune func(*Config)) {
	c := newCluster(t, 3, tune)
	want := map[string]string{}
	var last uint64
	for round := range 3 {
		for i := range 20 {
			k := fmt.Sprint("r", round, "k", i)
			want[k] = fmt.Sprint(i)
			last = c.put(k, want[k])
		}
		old := c.leader()
		c.kill(old)
		lead := c.leader(c.others(old)...)
		if lead == old {
			t.Fatalf("killed leader %d still leads", old)
		}
		for i := range 30 {
			k := fmt.Sprint("after-kill-", round, "-", i)
			want[k] = "yes"
			last = c.put(k, "yes", c.others(old)...)
		}
		// Restart from what its disk held at the kill; nothing
		// acknowledged may be missing once it has caught up.
		c.net.Heal()
		c.start(old, nil)
		c.checkAll(last, want)
	}
}

func TestPartitions(t *testing.T) {
	c := newCluster(t, 3, nil)
	want := map[string]string{}
	last := c.put("a", "1")
	want["a"] = "1"

	// Both ways: the leader alone on one side. The other two elect a new
	// leader and go on; the old one cannot commit.
	old := c.leader()
	c.net.Isolate(old)
	rest := c.others(old)
	lead := c.leader(rest...)
	if lead == old {
		t.Fatal("the isolated leader is still leader of the majority")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := c.nodes[old].Propose(ctx, []byte("lost=1"))
	cancel()
	if err == nil {
		t.Fatal("an isolated old leader committed a proposal")
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	err = c.nodes[old].Read(ctx)
	cancel()
	if err == nil {
		t.Fatal("an isolated old leader confirmed a read")
	}
	last = c.put("b", "2", rest...)
	want["b"] = "2"
	c.net.Heal()
	c.checkAll(last, want)
	if v, ok := c.sms[old].get("lost"); ok && v == "1" {
		// The entry may only survive if some majority accepted it,
		// which the partition made impossible.
		t.Fatal("a proposal made in a minority partition was applied")
	}

	// One way: the leader's messages to one follower are dropped, but
	// that follower's reach the leader. With PreVote and CheckQuorum the
	// follower may disrupt at most by winning an election; the group
	// keeps committing either way.
	lead = c.leader()
	f := c.others(lead)[0]
	c.net.Cut(lead, f)
	for i := range 10 {
		k := fmt.Sprint("oneway", i)
		want[k] = "x"
		last = c.put(k, "x")
	}
	c.net.Heal()
	c.checkAll(last, want)

	// One way the other side: the follower hears the leader but cannot
	// answer. The leader still has a quorum with the third replica.
	lead = c.leader()
	f = c.others(lead)[0]
	c.net.Cut(f, lead)
	for i := range 10 {
		k := fmt.Sprint("deaf", i)
		want[k] = "y"
		last = c.put(k, "y")
	}
	c.net.Heal()
	c.checkAll(last, want)
}

// TestPausedOldLeaderServesNothing stops the leader's goroutine (as SIGSTOP
// would) until a new leader has taken over and accepted a write, then
// asks the old leader for a read and a write as it wakes. Neither may
// succeed: its term is over.
func TestPausedOldLeaderServesNothing(t *testing.T) {
	t.Run("readindex", func(t *testing.T) { pausedOldLeader(t, nil) })
	t.Run("lease", func(t *testing.T) { pausedOldLeader(t, func(cfg *Config) { cfg.LeaseReads = true }) })
}

func pausedOldLeader(t *testing.T, tune func(*Config)) {
	c := newCluster(t, 3, tune)
	c.put("x", "old")
	old := c.leader()
	resume := c.nodes[old].pause()
	rest := c.others(old)
	lead := c.leader(rest...)
	last := c.put("x", "new", rest...)

	readErr := make(chan error, 1)
	writeErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		readErr <- c.nodes[old].Read(ctx)
	}()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.nodes[old].Propose(ctx, []byte("x=stale"))
		writeErr <- err
	}()
	// Let both requests queue up behind the pause.
	waitFor(t, 5*time.Second, "the requests to queue", func() bool { return len(c.nodes[old].reqc) >= 2 })
	resume()

	if err := <-writeErr; err == nil {
		t.Fatal("the old leader acknowledged a write after a new leader existed")
	}
	if err := <-readErr; err == nil {
		// A read that succeeds must reflect the new leader's write.
		if v, _ := c.sms[old].get("x"); v != "new" {
			t.Fatalf("the old leader answered a read with x=%q after x=new was acknowledged", v)
		}
	}
	c.checkAll(last, map[string]string{"x": "new"})
	if got := c.leader(); got != lead && got == old {
		t.Logf("the old leader %d won a later election; allowed", old)
	}
}

func TestLeadershipTransfer(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.put("a", "1")
	lead := c.leader()
	to := c.others(lead)[1]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.nodes[lead].TransferLeadership(ctx, to); err != nil {
		t.Fatalf("TransferLeadership: %v", err)
	}
	if got := c.leader(); got != to {
		t.Fatalf("leader %d after transfer to %d", got, to)
	}
	last := c.put("b", "2")
	c.checkAll(last, map[string]string{"a": "1", "b": "2"})
	var nl *NotLeaderError
	if err := c.nodes[lead].TransferLeadership(ctx, lead); !errors.As(err, &nl) {
		t.Fatalf("transfer from a follower: %v, want NotLeaderError", err)
	}
}

// chunkCounter wraps a Transport and counts snapshot chunks and their
// largest size.
type chunkCounter struct {
	Transport
	chunks  atomic.Int64
	largest atomic.Int64
}

func (cc *chunkCounter) SendChunk(ctx context.Context, to uint64, c Chunk) error {
	cc.chunks.Add(1)
	for {
		l := cc.largest.Load()
		if int64(len(c.Data)) <= l || cc.largest.CompareAndSwap(l, int64(len(c.Data))) {
			break
		}
	}
	return cc.Transport.SendChunk(ctx, to, c)
}

func TestLearnerCatchesUpFromChunkedSnapshotThenVotes(t *testing.T) {
	const chunk = 4 << 10
	var counters []*chunkCounter
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotEntries = 200
		cfg.CatchUpEntries = 20
		cfg.ChunkSize = chunk
		cc := &chunkCounter{Transport: cfg.Transport}
		counters = append(counters, cc)
		cfg.Transport = cc
	})
	want := map[string]string{}
	var last uint64
	for i := range 600 {
		k := fmt.Sprintf("key-%04d", i)
		want[k] = fmt.Sprintf("value-%d-%s", i, bytes.Repeat([]byte("v"), 40))
		last = c.put(k, want[k])
	}
	lead := c.leader()
	c.waitApplied(lead, last)
	if st := c.status(lead); st.SnapshotIndex == 0 {
		t.Fatalf("no snapshot taken after %d entries: %+v", last, st)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const learner = 4
	c.start(learner, nil)
	if err := c.nodes[lead].AddLearner(ctx, learner); err != nil {
		t.Fatalf("AddLearner: %v", err)
	}
	c.peers = append(c.peers, learner)
	last = c.put("after-learner", "1")
	want["after-learner"] = "1"
	c.checkAll(last, want)
	if st := c.status(learner); st.SnapshotIndex == 0 {
		t.Fatalf("learner caught up without a snapshot: %+v", st)
	}
	// The snapshot went in many chunks, none above the chunk size.
	var n, largest int64
	for _, cc := range counters {
		n += cc.chunks.Load()
		largest = max(largest, cc.largest.Load())
	}
	if n < 4 || largest > chunk {
		t.Fatalf("snapshot sent in %d chunks, largest %d bytes; want several of at most %d", n, largest, chunk)
	}
	if st := c.status(lead); !slices.Contains(st.Learners, learner) || slices.Contains(st.Voters, learner) {
		t.Fatalf("after AddLearner: voters %v learners %v", st.Voters, st.Learners)
	}

	if err := c.nodes[lead].Promote(ctx, learner); err != nil {
		t.Fatalf("Promote: %v", err)
	}
	if st := c.status(lead); !slices.Contains(st.Voters, learner) || len(st.Voters) != 4 {
		t.Fatalf("after Promote: voters %v learners %v", st.Voters, st.Learners)
	}
	// The new voter counts: with two of the old three down, the group
	// of four cannot commit; with one down and the new voter up it can.
	lead = c.leader()
	var down uint64
	for _, id := range c.others(lead) {
		if id != learner {
			down = id
			break
		}
	}
	c.kill(down)
	last = c.put("with-new-voter", "1", c.others(down)...)
	want["with-new-voter"] = "1"
	c.net.Heal()
	c.start(down, nil)
	c.checkAll(last, want)

	// Removal: the group shrinks back to three and goes on.
	lead = c.leader()
	victim := c.others(lead)[0]
	if err := c.nodes[lead].Remove(ctx, victim); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if st := c.status(lead); slices.Contains(st.Voters, victim) || len(st.Voters) != 3 {
		t.Fatalf("after Remove(%d): voters %v", victim, st.Voters)
	}
	c.kill(victim)
	c.peers = slices.DeleteFunc(c.peers, func(id uint64) bool { return id == victim })
	last = c.put("after-remove", "1")
	want["after-remove"] = "1"
	c.checkAll(last, want)
}

func TestEqualAppliedIndexGivesIdenticalSnapshots(t *testing.T) {
	c := newCluster(t, 3, nil)
	var last uint64
	for i := range 300 {
		last = c.put(fmt.Sprintf("k%03d", (i*37)%101), fmt.Sprint(i))
	}
	var bodies [][]byte
	for _, id := range c.peers {
		c.waitApplied(id, last)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		index, err := c.nodes[id].SnapshotNow(ctx)
		cancel()
		if err != nil || index != last {
			t.Fatalf("SnapshotNow at %d: index %d, %v; want %d", id, index, err, last)
		}
		lsn, body, ok, err := wal.OpenCheckpoint(c.fss[id], "replica")
		if err != nil || !ok || lsn != last {
			t.Fatalf("replica %d: checkpoint %d %v %v", id, lsn, ok, err)
		}
		b, err := io.ReadAll(body)
		body.Close()
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	for i := 1; i < len(bodies); i++ {
		if !bytes.Equal(bodies[0], bodies[i]) {
			t.Fatalf("replicas %d and %d wrote different snapshots at index %d", c.peers[0], c.peers[i], last)
		}
	}
}

// TestHardStateSurvivesCrash kills every replica in turn, restarts it cut
// off from the others, and checks that it comes back with at least the
// term it had and the same vote in that term: no replica can vote twice in
// a term.
func TestHardStateSurvivesCrash(t *testing.T) {
	c := newCluster(t, 3, nil)
	last := c.put("a", "1")
	for _, id := range c.peers {
		c.waitApplied(id, last)
		before := c.status(id)
		c.kill(id)
		c.start(id, nil) // still isolated: kill cut its links
		after := c.status(id)
		if after.Term < before.Term || (after.Term == before.Term && after.Vote != before.Vote) {
			t.Fatalf("replica %d: term %d vote %d before the crash, term %d vote %d after",
				id, before.Term, before.Vote, after.Term, after.Vote)
		}
		// Applied entries were durable before they were applied.
		if after.Last < before.Applied {
			t.Fatalf("replica %d lost applied entries: last %d, applied was %d", id, after.Last, before.Applied)
		}
		c.net.Heal()
		last = c.put(fmt.Sprint("after-", id), "1")
		c.checkAll(last, map[string]string{"a": "1"})
	}
}
