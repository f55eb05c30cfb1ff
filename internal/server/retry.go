package server

import (
	"hash/maphash"
	"math/bits"

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
//
// Every logged call looks the cache up, adds to it and, once it is full,
// forgets the oldest entry: three lookups a call on every replica. So the
// entries live in the ring, in insertion order, and an open-addressing
// index (linear probing, at most half full) maps a key's hash to its ring
// position. A miss, the common case, reads one line of the index; the
// ring is written and read in order.
type retryCache struct {
	ring  []retrySlot // entries in insertion order, from head on; len(ring) is the capacity
	head  int         // ring position of the oldest entry
	n     int         // entries in the ring
	index []indexSlot // len a power of two, at least twice the capacity
	seed  maphash.Seed

	// unstamped: the entries came from a checkpoint of the version that
	// did not keep their times; the next record's time is given them.
	unstamped bool
}

// retrySlot is one entry of the ring. Its time is kept beside the
// outcome's so that expire, run after every record, reads the ring alone.
type retrySlot struct {
	key  callKey
	hash uint64 // of key, to find its index slot when it goes
	out  outcome
}

// indexSlot is one slot of the index: pos is a ring position plus one (0:
// an empty slot), tag the high bits of the key's hash, so that a probe
// compares keys only where the tags agree.
type indexSlot struct {
	pos uint32
	tag uint32
}

func newRetryCache(capacity int) *retryCache {
	capacity = max(capacity, 1)
	size := 1 << bits.Len(uint(2*capacity-1))
	return &retryCache{ring: make([]retrySlot, capacity), index: make([]indexSlot, size), seed: maphash.MakeSeed()}
}

func (c *retryCache) hash(k callKey) uint64 { return maphash.Comparable(c.seed, k) }

// find returns the index slot of k, or of the empty slot where k would go.
func (c *retryCache) find(k callKey, h uint64) (slot int, found bool) {
	mask := len(c.index) - 1
	tag := uint32(h >> 32)
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := c.index[i]
		if s.pos == 0 {
			return i, false
		}
		if s.tag == tag && c.ring[s.pos-1].key == k {
			return i, true
		}
	}
}

func (c *retryCache) get(k callKey) (outcome, bool) {
	i, ok := c.find(k, c.hash(k))
	if !ok {
		return outcome{}, false
	}
	return c.ring[c.index[i].pos-1].out, true
}

// put adds the outcome of call k. A key already present (a call applied
// twice, which get prevents) keeps its place and its first time in the
// ring: it expires as the first outcome would have.
func (c *retryCache) put(k callKey, o outcome) {
	h := c.hash(k)
	i, ok := c.find(k, h)
	if ok {
		s := &c.ring[c.index[i].pos-1]
		o.at = s.out.at
		s.out = o
		return
	}
	if c.n == len(c.ring) {
		c.dropOldest()
		i, _ = c.find(k, h) // the drop may have shifted the slots
	}
	pos := (c.head + c.n) % len(c.ring)
	c.ring[pos] = retrySlot{key: k, hash: h, out: o}
	c.index[i] = indexSlot{pos: uint32(pos) + 1, tag: uint32(h >> 32)}
	c.n++
}

// expire forgets the entries made before the time before, oldest first.
// Records apply in time order, so they are at the head of the ring.
func (c *retryCache) expire(before int64) {
	for c.n > 0 && c.ring[c.head].out.at < before {
		c.dropOldest()
	}
}

func (c *retryCache) dropOldest() {
	s := &c.ring[c.head]
	i, ok := c.find(s.key, s.hash)
	if ok {
		c.unindex(i)
	}
	*s = retrySlot{}
	c.head = (c.head + 1) % len(c.ring)
	c.n--
}

// unindex empties index slot i, moving back the slots after it whose
// probe passed through i so that every key stays reachable from its home
// slot (deletion without tombstones).
func (c *retryCache) unindex(i int) {
	mask := len(c.index) - 1
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		s := c.index[j]
		if s.pos == 0 {
			break
		}
		home := int(c.ring[s.pos-1].hash) & mask
		// s may move to i if i lies cyclically in [home, j).
		if (j-home)&mask >= (j-i)&mask {
			c.index[i] = s
			i = j
		}
	}
	c.index[i] = indexSlot{}
}

func (c *retryCache) len() int { return c.n }

// entries returns a copy of the entries, oldest first, as each visits
// them: the ring's two runs copied whole, into buf if it has room.
func (c *retryCache) entries(buf []retrySlot) []retrySlot {
	out := buf[:0]
	if cap(out) < c.n {
		out = make([]retrySlot, c.n)
	}
	out = out[:c.n]
	k := copy(out, c.ring[c.head:min(c.head+c.n, len(c.ring))])
	copy(out[k:], c.ring[:c.n-k])
	return out
}

// setTime sets the time of k's outcome, if k is kept.
func (c *retryCache) setTime(k callKey, at int64) {
	if i, ok := c.find(k, c.hash(k)); ok {
		c.ring[c.index[i].pos-1].out.at = at
	}
}

// stamp gives every entry without a time the time now.
func (c *retryCache) stamp(now int64) {
	for i := range c.n {
		if s := &c.ring[(c.head+i)%len(c.ring)]; s.out.at == 0 {
			s.out.at = now
		}
	}
	c.unstamped = false
}
