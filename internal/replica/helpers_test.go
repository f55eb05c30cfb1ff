package replica

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/vfs"
)

var quiet = testLogger()

func testLogger() *slog.Logger {
	if os.Getenv("REPLICA_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// kv is a toy key-value StateMachine: an entry "key=value" sets a key, and
// Apply returns the index it was applied at. Its snapshot lists the keys in
// order, so that equal states give equal bytes.
type kv struct {
	mu      sync.Mutex
	m       map[string]string
	applied uint64
	decoded int // entries applied by ApplyDecoded
}

func newKV() *kv { return &kv{m: make(map[string]string)} }

func (s *kv) Apply(index uint64, data []byte) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, v, _ := strings.Cut(string(data), "=")
	s.m[k] = v
	s.applied = index
	return index
}

// ApplyDecoded applies an entry proposed here from the value given to
// ProposeDecoded: a [2]string of key and value.
func (s *kv) ApplyDecoded(index uint64, data []byte, decoded any) any {
	kv, ok := decoded.([2]string)
	if !ok {
		return s.Apply(index, data)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[kv[0]] = kv[1]
	s.applied = index
	s.decoded++
	return index
}

func (s *kv) decodedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decoded
}

func (s *kv) Snapshot() (func(io.Writer) error, func(), error) {
	s.mu.Lock()
	m := maps.Clone(s.m)
	s.mu.Unlock()
	write := func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(len(m)))
		bw.Write(b[:])
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(bw, "%d:%s%d:%s", len(k), k, len(m[k]), m[k])
		}
		return bw.Flush()
	}
	return write, func() {}, nil
}

func (s *kv) Restore(r io.Reader) error {
	br := bufio.NewReader(r)
	var b [8]byte
	if _, err := io.ReadFull(br, b[:]); err != nil {
		return err
	}
	m := make(map[string]string)
	for range binary.LittleEndian.Uint64(b[:]) {
		var kn, vn int
		if _, err := fmt.Fscanf(br, "%d:", &kn); err != nil {
			return err
		}
		k := make([]byte, kn)
		if _, err := io.ReadFull(br, k); err != nil {
			return err
		}
		if _, err := fmt.Fscanf(br, "%d:", &vn); err != nil {
			return err
		}
		v := make([]byte, vn)
		if _, err := io.ReadFull(br, v); err != nil {
			return err
		}
		m[string(k)] = string(v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = m
	return nil
}

func (s *kv) get(k string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	return v, ok
}

// cluster is a group of replicas on one MemNetwork, each on its own MemFS.
type cluster struct {
	t     testing.TB
	net   *MemNetwork
	nodes map[uint64]*Node
	sms   map[uint64]*kv
	fss   map[uint64]*vfs.MemFS
	peers []uint64
	tune  func(*Config)
	rng   *rand.Rand
}

// Test election settings: 10 ms ticks, elections after 100-200 ms.
const (
	testTick     = 10 * time.Millisecond
	testElection = 10
)

func newCluster(t testing.TB, size int, tune func(*Config)) *cluster {
	c := &cluster{t: t, net: NewMemNetwork(), nodes: map[uint64]*Node{},
		sms: map[uint64]*kv{}, fss: map[uint64]*vfs.MemFS{}, tune: tune}
	seed := uint64(time.Now().UnixNano())
	if _, ok := t.(*testing.T); ok {
		t.Logf("crash seed %d", seed)
	}
	c.rng = rand.New(rand.NewPCG(seed, 1))
	for id := uint64(1); id <= uint64(size); id++ {
		c.peers = append(c.peers, id)
	}
	for _, id := range c.peers {
		c.fss[id] = vfs.NewMem()
		c.start(id, c.peers)
	}
	t.Cleanup(c.stopAll)
	return c
}

// start starts replica id on its FS; peers matter on a first start only.
func (c *cluster) start(id uint64, peers []uint64) *Node {
	c.t.Helper()
	if c.fss[id] == nil {
		c.fss[id] = vfs.NewMem()
	}
	sm := newKV()
	cfg := Config{
		ID: id, FS: c.fss[id], Dir: "replica", Peers: peers,
		StateMachine: sm, Transport: c.net.Transport(id),
		TickInterval: testTick, ElectionTicks: testElection, HeartbeatTicks: 1,
		Logger: quiet,
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	n, err := Start(cfg)
	if err != nil {
		c.t.Fatalf("start replica %d: %v", id, err)
	}
	c.nodes[id], c.sms[id] = n, sm
	c.net.Attach(id, n)
	return n
}

// kill stops replica id as SIGKILL would: it is cut off first, so that it
// sends nothing more, then what its disk held at that instant is all a
// restart finds.
func (c *cluster) kill(id uint64) {
	c.t.Helper()
	c.net.Isolate(id)
	c.net.Detach(id)
	// Sometimes with a torn prefix of what was written but not synced.
	crashed := c.fss[id].Crash()
	if c.rng.IntN(2) == 0 {
		crashed = c.fss[id].CrashTorn(c.rng)
	}
	if err := c.nodes[id].Stop(); err != nil {
		c.t.Fatalf("stop replica %d: %v", id, err)
	}
	delete(c.nodes, id)
	c.fss[id] = crashed
}

func (c *cluster) stopAll() {
	for id, n := range c.nodes {
		if err := n.Stop(); err != nil {
			c.t.Errorf("stop replica %d: %v", id, err)
		}
	}
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (c *cluster) status(id uint64) Status {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.nodes[id].Status(ctx)
	if err != nil {
		c.t.Fatalf("status of %d: %v", id, err)
	}
	return st
}

// leader waits until the running replicas in among agree on one leader,
// itself among them, and returns it.
func (c *cluster) leader(among ...uint64) uint64 {
	c.t.Helper()
	if len(among) == 0 {
		among = slices.Sorted(maps.Keys(c.nodes))
	}
	var lead uint64
	waitFor(c.t, 10*time.Second, "a leader", func() bool {
		lead = 0
		for _, id := range among {
			st := c.status(id)
			if st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				return false
			}
			lead = st.Leader
		}
		return slices.Contains(among, lead) && c.status(lead).Role == "StateLeader"
	})
	return lead
}

// put proposes key=value at the leader among the given replicas, retrying
// through elections, and returns the index it was applied at.
func (c *cluster) put(key, value string, among ...uint64) uint64 {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lead := c.leader(among...)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v, err := c.nodes[lead].Propose(ctx, []byte(key+"="+value))
		cancel()
		if err == nil {
			return v.(uint64)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("put %s=%s: %v", key, value, err)
		}
	}
}

// waitApplied waits until replica id has applied index.
func (c *cluster) waitApplied(id, index uint64) {
	c.t.Helper()
	waitFor(c.t, 10*time.Second, fmt.Sprintf("replica %d to apply %d", id, index), func() bool {
		return c.status(id).Applied >= index
	})
}

func isRetryable(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrLeadershipLost) ||
		errors.Is(err, ErrNoLeader) || errors.Is(err, context.DeadlineExceeded)
}
