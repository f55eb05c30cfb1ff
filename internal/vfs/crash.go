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

// CrashTorn is like Crash, except that a file whose only unsynced change is
// bytes appended at its end keeps a prefix of those bytes, of a length
// chosen with rng: a torn write, as when the machine stopped while the
// kernel was writing the file back. A file changed in any other way since
// its last Sync keeps only its synced bytes. Given the same rng state and
// the same history, CrashTorn returns the same result.
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
	if rng != nil && n.dirtyFrom == len(n.synced) && len(n.data) > len(n.synced) {
		kept = n.data[:len(n.synced)+rng.IntN(len(n.data)-len(n.synced)+1)]
	}
	c := &memNode{
		data:      bytes.Clone(kept),
		synced:    bytes.Clone(kept),
		dirtyFrom: len(kept),
	}
	copies[n] = c
	return c
}
