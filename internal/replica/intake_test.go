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

// TestProposeDecoded: the leader applies its own proposals from the values
// they were encoded from, the followers from the bytes, and every replica
// ends with the same state.
func TestProposeDecoded(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader()
	const n = 300
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last uint64
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		wg.Add(1)
		// The bytes say "b", the decoded value "b" too: what a follower
		// decodes is what the leader was given.
		c.nodes[lead].ProposeDecoded([]byte(k+"=b"), [2]string{k, "b"}, func(val any, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("%s: %v", k, err)
				return
			}
			mu.Lock()
			last = max(last, val.(uint64))
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, id := range c.peers {
		c.waitApplied(id, last)
		if v, _ := c.sms[id].get(fmt.Sprintf("k%d", n-1)); v != "b" {
			t.Fatalf("replica %d: k%d = %q", id, n-1, v)
		}
		got, want := c.sms[id].decodedCount(), 0
		if id == lead {
			want = n
		}
		if got != want {
			t.Errorf("replica %d applied %d entries from decoded values, want %d", id, got, want)
		}
	}
}
