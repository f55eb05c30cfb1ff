package vfs

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"slices"
)

// Crash returns a new MemFS holding only what m has made durable, as a
// machine that lost power at this instant would find on restart:
//
//   - each directory holds the entries it had at its last SyncDir (a
//     directory never synced is empty, and is itself reachable only if its
//     parent was synced after it was created);
//   - each file holds the bytes it had at its last File.Sync.
//
// m is not changed, and files open on m stay open on m. The two file
// systems share nothing afterwards.
func (m *MemFS) Crash() *MemFS { return m.crash(nil) }

// CrashTorn is like Crash, except that a file whose unsynced changes are
// only writes, at its end or over bytes it had, keeps part of them: from
// the first byte changed since its last Sync, a prefix of the new bytes (of
// a length chosen with rng) and after it the bytes last synced. That is a
// torn write, as when the machine stopped while the kernel was writing the
// file back in order. A file cut below its synced length since its last
// Sync keeps only its synced bytes. Given the same rng state and the same
// history, CrashTorn returns the same result.
func (m *MemFS) CrashTorn(rng *rand.Rand) *MemFS { return m.crash(rng) }

func (m *MemFS) crash(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	copies := make(map[*memNode]*memNode)
	return &MemFS{root: m.root.durableCopy(copies, rng)}
}

// durableCopy returns a copy of the durable state of n. copies maps nodes
// already copied to their copies, so that a node reachable by two durable
// names stays one node.
func (n *memNode) durableCopy(copies map[*memNode]*memNode, rng *rand.Rand) *memNode {
	if c, ok := copies[n]; ok {
		return c
	}
	if n.isDir {
		c := newDirNode()
		copies[n] = c
		// Sorted, so that rng is consumed in the same order every time.
		for _, name := range slices.Sorted(maps.Keys(n.syncedChildren)) {
			c.children[name] = n.syncedChildren[name].durableCopy(copies, rng)
		}
		c.syncedChildren = maps.Clone(c.children)
		return c
	}
	kept := n.synced
	if rng != nil && !n.shrunk && len(n.data) > n.dirtyFrom {
		torn := n.dirtyFrom + rng.IntN(len(n.data)-n.dirtyFrom+1)
		kept = n.data[:torn]
		if torn < len(n.synced) {
			kept = append(slices.Clip(kept), n.synced[torn:]...)
		}
	}
	c := &memNode{
		data:      bytes.Clone(kept),
		synced:    bytes.Clone(kept),
		dirtyFrom: len(kept),
	}
	copies[n] = c
	return c
}
