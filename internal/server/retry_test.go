package server

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
)

func key(c byte, call uint64) callKey { return callKey{client: rpc.ClientID{c}, call: call} }

func keysOf(c *retryCache) []callKey {
	var ks []callKey
	c.each(func(k callKey, _ outcome) { ks = append(ks, k) })
	return ks
}

// TestRetryCacheBoundsAndExpiry: the cache forgets its oldest entry when
// full, expires entries by the time they were made, oldest first, and
// gives entries without a time (from an old checkpoint) the next time.
func TestRetryCacheBoundsAndExpiry(t *testing.T) {
	c := newRetryCache(3)
	for i := range uint64(4) {
		c.put(key(1, i), outcome{status: uint32(i), at: int64(10 + i)})
	}
	if _, ok := c.get(key(1, 0)); ok || c.len() != 3 {
		t.Fatalf("full cache kept its oldest entry (len %d)", c.len())
	}
	if o, ok := c.get(key(1, 3)); !ok || o.status != 3 {
		t.Fatalf("newest entry: %+v %v", o, ok)
	}

	c.expire(12) // entries made at 11 go; 12 and 13 stay
	if got := keysOf(c); len(got) != 2 || got[0] != key(1, 2) || got[1] != key(1, 3) {
		t.Fatalf("after expire(12): %v", got)
	}

	c.put(key(1, 2), outcome{status: 9, at: 20}) // a second outcome keeps the first time
	if o, _ := c.get(key(1, 2)); o.status != 9 {
		t.Fatalf("second outcome not kept: %+v", o)
	}
	c.expire(13)
	if _, ok := c.get(key(1, 2)); ok {
		t.Fatal("an entry outlived its first time")
	}

	old := newRetryCache(4)
	old.put(key(2, 1), outcome{})
	old.put(key(2, 2), outcome{})
	old.stamp(100)
	old.put(key(2, 3), outcome{at: 150})
	if o, _ := old.get(key(2, 1)); o.at != 100 {
		t.Fatalf("stamped time %d, want 100", o.at)
	}
	old.expire(101)
	if got := keysOf(old); len(got) != 1 || got[0] != key(2, 3) {
		t.Fatalf("after stamp and expire: %v", got)
	}

	// A checkpoint's load puts the outcomes first and their times after.
	loaded := newRetryCache(4)
	for i := range uint64(3) {
		loaded.put(key(3, i), outcome{})
	}
	for i := range uint64(3) {
		loaded.setTime(key(3, i), int64(200+i))
	}
	loaded.expire(201)
	if got := keysOf(loaded); len(got) != 2 || got[0] != key(3, 1) {
		t.Fatalf("after load and expire(201): %v", got)
	}
	loaded.expire(1000)
	if loaded.len() != 0 {
		t.Fatalf("%d entries outlived their times", loaded.len())
	}
}

// TestRetryCacheAgreesWithModel runs random puts, lookups and expiries
// against small caches, whose index is full of collisions, and compares
// every answer with a plain model: a list in insertion order. The
// deletions move index slots back; a key they made unreachable would show
// as a miss here.
func TestRetryCacheAgreesWithModel(t *testing.T) {
	type entry struct {
		k  callKey
		at int64
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for capacity := 1; capacity <= 40; capacity++ {
		c := newRetryCache(capacity)
		var model []entry
		now := int64(0)
		for step := range 3000 {
			k := key(byte(rng.IntN(4)), uint64(rng.IntN(3*capacity)))
			switch op := rng.IntN(10); {
			case op < 6: // a call applied, unless the cache knows it
				now++
				_, ok := c.get(k)
				known := slices.ContainsFunc(model, func(e entry) bool { return e.k == k })
				if ok != known {
					t.Fatalf("capacity %d step %d: get %v = %v, model %v", capacity, step, k, ok, known)
				}
				if ok {
					continue
				}
				c.put(k, outcome{status: uint32(k.call), at: now})
				model = append(model, entry{k, now})
				if len(model) > capacity {
					model = model[1:]
				}
			case op < 9:
				o, ok := c.get(k)
				i := slices.IndexFunc(model, func(e entry) bool { return e.k == k })
				if ok != (i >= 0) || ok && (o.status != uint32(k.call) || o.at != model[i].at) {
					t.Fatalf("capacity %d step %d: get %v = %+v %v, model %d", capacity, step, k, o, ok, i)
				}
			default:
				before := now - int64(rng.IntN(2*capacity))
				c.expire(before)
				for len(model) > 0 && model[0].at < before {
					model = model[1:]
				}
			}
			if c.len() != len(model) {
				t.Fatalf("capacity %d step %d: %d entries, model %d", capacity, step, c.len(), len(model))
			}
		}
		got := keysOf(c)
		for i, e := range model {
			if got[i] != e.k {
				t.Fatalf("capacity %d: entry %d is %v, model %v", capacity, i, got[i], e.k)
			}
			if _, ok := c.get(e.k); !ok {
				t.Fatalf("capacity %d: %v unreachable", capacity, e.k)
			}
		}
	}
}

// BenchmarkRetryCacheApply is the cache's share of applying one logged
// call: a lookup for a retry, the put, and the expiry that follows every
// record, with a full cache.
func BenchmarkRetryCacheApply(b *testing.B) {
	const size = 1 << 16
	c := newRetryCache(size)
	for i := range uint64(size) {
		c.put(key(byte(i%64), i), outcome{at: int64(i)})
	}
	b.ResetTimer()
	for i := range uint64(b.N) {
		k := key(byte(i%64), size+i)
		if _, ok := c.get(k); ok {
			b.Fatal("hit")
		}
		c.put(k, outcome{at: int64(size + i)})
		c.expire(int64(i))
	}
}

// BenchmarkFreezeState is the apply loop's share of a checkpoint with a
// full retry cache whose entries all hold a reply: the hand-over alone,
// the encoding being the checkpointer's.
func BenchmarkFreezeState(b *testing.B) {
	const size = 1 << 16
	sm := newStateMachine(size, time.Hour, slog.New(slog.DiscardHandler))
	sm.eng = engine.New(0, 1)
	for i := range uint64(size) {
		sm.cache.put(key(byte(i%64), i), outcome{method: pb.Method_MKDIR, reply: &pb.AttrReply{Attr: &pb.Attr{Ino: i, Mode: 0o100644}}, at: int64(i)})
	}
	b.ResetTimer()
	for range b.N {
		job, err := sm.freezeState()
		if err != nil {
			b.Fatal(err)
		}
		job.frozen.Release()
	}
}

// TestCheckpointsKeepTheRetryCacheOfTheirMoment: each checkpoint holds the
// retry cache as it was at its freeze, also when the cache changes while
// it is encoded and when it is copied into the buffer an earlier
// checkpoint gave back; its entries decode with their replies.
func TestCheckpointsKeepTheRetryCacheOfTheirMoment(t *testing.T) {
	const size = 64
	newSM := func() *stateMachine {
		sm := newStateMachine(size, time.Hour, slog.New(slog.DiscardHandler))
		sm.eng = engine.New(0, 1)
		return sm
	}
	sm := newSM()
	put := func(from, to uint64) {
		for i := from; i < to; i++ {
			sm.cache.put(key(byte(i%7), i), outcome{method: pb.Method_MKDIR, reply: &pb.AttrReply{Attr: &pb.Attr{Ino: 1000 + i}}, at: int64(i)})
		}
	}
	check := func(round int, body []byte, from, to uint64) {
		t.Helper()
		got := newSM()
		if err := got.decodeState(bytes.NewReader(body)); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		var keys []callKey
		got.cache.each(func(k callKey, o outcome) {
			keys = append(keys, k)
			// A decoded reply keeps its bytes (as unknown fields).
			got, err1 := proto.Marshal(o.reply)
			want, err2 := proto.Marshal(&pb.AttrReply{Attr: &pb.Attr{Ino: 1000 + k.call}})
			if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
				t.Fatalf("round %d: entry %v decoded with reply %v", round, k, o.reply)
			}
		})
		var want []callKey
		for i := from; i < to; i++ {
			want = append(want, key(byte(i%7), i))
		}
		if !slices.Equal(keys, want) {
			t.Fatalf("round %d: cache holds %v, want %v", round, keys, want)
		}
	}
	put(0, 40)
	for round := range 4 {
		job, err := sm.freezeState()
		if err != nil {
			t.Fatal(err)
		}
		// Past the freeze, the live cache moves on before the encoding:
		// the ring wraps, and the oldest entries are forgotten.
		top := uint64(40 + round*40) // the cache held the calls below top, the last size of them
		put(top, top+40)
		if err := job.encode(); err != nil {
			t.Fatal(err)
		}
		job.frozen.Release()
		check(round, bytes.Join(job.body, nil), max(top, size)-size, top)
	}
}

// TestEncodeBlocks: what is written comes back in order, in blocks of at
// most encodeBlockSize bytes, whatever the sizes of the writes.
func TestEncodeBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	var b encodeBlocks
	for len(want) < 3*encodeBlockSize+12345 {
		p := make([]byte, rng.IntN(3*encodeBlockSize/2))
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		if n, err := b.Write(p); n != len(p) || err != nil {
			t.Fatalf("write of %d: %d, %v", len(p), n, err)
		}
		want = append(want, p...)
	}
	for i, part := range b.parts {
		if len(part) > encodeBlockSize || (i < len(b.parts)-1 && len(part) != encodeBlockSize) {
			t.Fatalf("block %d of %d holds %d bytes", i, len(b.parts), len(part))
		}
	}
	if got := bytes.Join(b.parts, nil); b.n != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("%d bytes back (n %d), %d written, equal %v", len(got), b.n, len(want), bytes.Equal(got, want))
	}
}

// each calls fn for every entry of c, oldest first.
func (c *retryCache) each(fn func(callKey, outcome)) {
	for _, s := range c.entries(nil) {
		fn(s.key, s.out)
	}
}
