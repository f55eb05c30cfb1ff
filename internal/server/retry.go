package server

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"

	"github.com/canopyfs/canopy/internal/rpc"
)

// callKey identifies one call of one client across retries.
type callKey struct {
	client rpc.ClientID
	call   uint64
}

// outcome is what a logged call returned, kept to answer its retries.
type outcome struct {
	method pb.Method // what decodes reply in a checkpoint
	status uint32
	reply  proto.Message // nil for an empty reply; never modified once stored
	at     int64         // the time of the record that made it (the replicated clock)
}

// retryCache remembers the outcomes of the most recent logged calls so
// that a retried call is answered with its first outcome instead of being
// applied again. It is bounded in count (the oldest entries are forgotten
// first) and in age: an entry goes once the replicated clock, the time
// carried by the records, is ttl past it (expire). Part of the state
// machine, owned by the apply loop; it is rebuilt by log replay and
// carried in checkpoints, oldest first.
type retryCache struct {
	entries map[callKey]outcome
	ring    []callKey // keys in insertion order, from head on; len(ring) is the capacity
	head    int       // ring position of the oldest entry
	n       int       // entries in the ring

	// unstamped: the entries came from a checkpoint of the version that
	// did not keep their times; the next record's time is given them.
	unstamped bool
}

func newRetryCache(capacity int) *retryCache {
	return &retryCache{entries: make(map[callKey]outcome, capacity), ring: make([]callKey, max(capacity, 1))}
}

func (c *retryCache) get(k callKey) (outcome, bool) {
	o, ok := c.entries[k]
	return o, ok
}

func (c *retryCache) put(k callKey, o outcome) {
	if _, ok := c.entries[k]; ok {
		c.entries[k] = o
		return
	}
	if c.n == len(c.ring) {
		c.dropOldest()
	}
	c.ring[(c.head+c.n)%len(c.ring)] = k
	c.n++
	c.entries[k] = o
}

// expire forgets the entries made before the time before, oldest first.
// Records apply in time order, so they are at the head of the ring.
func (c *retryCache) expire(before int64) {
	for c.n > 0 && c.entries[c.ring[c.head]].at < before {
		c.dropOldest()
	}
}

func (c *retryCache) dropOldest() {
	delete(c.entries, c.ring[c.head])
	c.ring[c.head] = callKey{}
	c.head = (c.head + 1) % len(c.ring)
	c.n--
}

// each calls fn for every entry, oldest first.
func (c *retryCache) each(fn func(callKey, outcome)) {
	for i := range c.n {
		k := c.ring[(c.head+i)%len(c.ring)]
		fn(k, c.entries[k])
	}
}

func (c *retryCache) len() int { return c.n }

// stamp gives every entry without a time the time now.
func (c *retryCache) stamp(now int64) {
	for k, o := range c.entries {
		if o.at == 0 {
			o.at = now
			c.entries[k] = o
		}
	}
	c.unstamped = false
}
