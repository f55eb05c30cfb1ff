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

// outcome is what a mutation returned, kept to answer its retries.
type outcome struct {
	method pb.Method // what decodes reply in a checkpoint
	status uint32
	reply  proto.Message // nil for an empty reply; never modified once stored
}

// retryCache remembers the outcomes of the most recent mutations so that a
// retried call is answered with its first outcome instead of being applied
// again. It is bounded: the oldest entries are forgotten first. Owned by
// the apply loop; it is rebuilt by log replay and carried in checkpoints.
type retryCache struct {
	entries map[callKey]outcome
	order   []callKey // ring of keys in insertion order
	next    int       // ring position of the next insertion
}

func newRetryCache(capacity int) *retryCache {
	return &retryCache{entries: make(map[callKey]outcome, capacity), order: make([]callKey, 0, capacity)}
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
	if len(c.order) < cap(c.order) {
		c.order = append(c.order, k)
	} else {
		delete(c.entries, c.order[c.next])
		c.order[c.next] = k
		c.next = (c.next + 1) % len(c.order)
	}
	c.entries[k] = o
}

// each calls fn for every entry, oldest first.
func (c *retryCache) each(fn func(callKey, outcome)) {
	n := len(c.order)
	for i := range n {
		k := c.order[(c.next+i)%n]
		fn(k, c.entries[k])
	}
}

func (c *retryCache) len() int { return len(c.entries) }
