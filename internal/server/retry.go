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
	ring    []ringSlot // keys in insertion order, from head on; len(ring) is the capacity
	head    int        // ring position of the oldest entry
	n       int        // entries in the ring

	// unstamped: the entries came from a checkpoint of the version that
	// did not keep their times; the next record's time is given them.
	unstamped bool
}

// ringSlot is one entry's key and time in insertion order. The time is
// kept here as well as in the outcome so that expire, run after every
// record, looks at the oldest entries without a map lookup each.
type ringSlot struct {
	key callKey
	at  int64
}

func newRetryCache(capacity int) *retryCache {
	return &retryCache{entries: make(map[callKey]outcome, capacity), ring: make([]ringSlot, max(capacity, 1))}
}

func (c *retryCache) get(k callKey) (outcome, bool) {
	o, ok := c.entries[k]
	return o, ok
}

// put adds the outcome of call k. A key already present (a call applied
// twice, which get prevents) keeps its place and its first time in the
// ring: it expires as the first outcome would have.
func (c *retryCache) put(k callKey, o outcome) {
	if _, ok := c.entries[k]; ok {
		c.entries[k] = o
		return
	}
	if c.n == len(c.ring) {
		c.dropOldest()
	}
	c.ring[(c.head+c.n)%len(c.ring)] = ringSlot{key: k, at: o.at}
	c.n++
	c.entries[k] = o
}

// expire forgets the entries made before the time before, oldest first.
// Records apply in time order, so they are at the head of the ring.
func (c *retryCache) expire(before int64) {
	for c.n > 0 && c.ring[c.head].at < before {
		c.dropOldest()
	}
}

func (c *retryCache) dropOldest() {
	delete(c.entries, c.ring[c.head].key)
	c.ring[c.head] = ringSlot{}
	c.head = (c.head + 1) % len(c.ring)
	c.n--
}

// each calls fn for every entry, oldest first.
func (c *retryCache) each(fn func(callKey, outcome)) {
	for i := range c.n {
		k := c.ring[(c.head+i)%len(c.ring)].key
		fn(k, c.entries[k])
	}
}

func (c *retryCache) len() int { return c.n }

// setTime sets the time of k's outcome, if k is kept. The ring's copy of
// the time is set by retimeRing, once every time is set.
func (c *retryCache) setTime(k callKey, at int64) {
	if o, ok := c.entries[k]; ok {
		o.at = at
		c.entries[k] = o
	}
}

// retimeRing gives the ring the times of the outcomes, after setTime.
func (c *retryCache) retimeRing() {
	for i := range c.n {
		s := &c.ring[(c.head+i)%len(c.ring)]
		s.at = c.entries[s.key].at
	}
}

// stamp gives every entry without a time the time now.
func (c *retryCache) stamp(now int64) {
	for k, o := range c.entries {
		if o.at == 0 {
			o.at = now
			c.entries[k] = o
		}
	}
	for i := range c.n {
		if s := &c.ring[(c.head+i)%len(c.ring)]; s.at == 0 {
			s.at = now
		}
	}
	c.unstamped = false
}
