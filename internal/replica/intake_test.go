package replica

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestProposeAsync proposes without waiting from many goroutines: every
// proposal is answered once with its entry's Apply result and is applied
// on every replica; a follower answers NotLeaderError naming the leader,
// and a stopped Node answers ErrStopped at once.
func TestProposeAsync(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader()
	const writers, each = 8, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	var last uint64
	for w := range writers {
		for i := range each {
			key := fmt.Sprintf("w%d-%d", w, i)
			wg.Add(1)
			c.nodes[lead].ProposeAsync([]byte(key+"=v"), func(val any, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				answers[key]++
				if err != nil {
					t.Errorf("%s: %v", key, err)
					return
				}
				if idx, ok := val.(uint64); ok && idx > last {
					last = idx
				}
			})
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("proposals left unanswered")
	}
	if len(answers) != writers*each {
		t.Fatalf("%d proposals answered, want %d", len(answers), writers*each)
	}
	for k, n := range answers {
		if n != 1 {
			t.Fatalf("%s answered %d times", k, n)
		}
	}
	for _, id := range c.peers {
		c.waitApplied(id, last)
		if v, _ := c.sms[id].get("w7-199"); v != "v" {
			t.Fatalf("replica %d: w7-199 = %q", id, v)
		}
	}

	follower := c.peers[0]
	if follower == lead {
		follower = c.peers[1]
	}
	errc := make(chan error, 1)
	c.nodes[follower].ProposeAsync([]byte("x=y"), func(_ any, err error) { errc <- err })
	var nl *NotLeaderError
	if err := <-errc; !errors.As(err, &nl) || nl.Leader != lead {
		t.Fatalf("proposal at a follower: %v, want NotLeaderError naming %d", err, lead)
	}

	if err := c.nodes[follower].Stop(); err != nil {
		t.Fatal(err)
	}
	called := false
	c.nodes[follower].ProposeAsync([]byte("x=z"), func(_ any, err error) {
		called = true
		if !errors.Is(err, ErrStopped) {
			t.Errorf("proposal at a stopped replica: %v, want ErrStopped", err)
		}
	})
	if !called {
		t.Fatal("a stopped replica did not answer a proposal at once")
	}
}
