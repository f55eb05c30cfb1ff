package engine

import (
	"sort"
	"syscall"
)

// nominal capacity reported by Statfs until the data path reports real use.
const (
	nominalBytes  = 1 << 50 // 1 PiB
	nominalInodes = 1 << 40
	blockSize     = 4096
	dirSize       = 4096 // st_size of a directory, as on ext4
)

// node is one inode of the namespace.
type node struct {
	attr     Attr
	parent   Ino               // directories only: the directory that holds it (root: itself)
	children map[string]Ino    // directories only
	sorted   *nameCache        // directories only: children's names in order; nil when stale
	target   string            // symlinks only
	xattrs   map[string][]byte // nil when there are none
	file     *fileData         // regular files with data only: stored slices per chunk
}

// nameCache is a directory's child names in byte order, built for paged
// listings. Behind a pointer, like fileData, so that a node stays within
// 128 bytes.
type nameCache struct{ names []string }

func (n *node) isDir() bool { return n.attr.Mode&S_IFMT == S_IFDIR }

// sortedNames returns the directory's child names in byte order, rebuilding
// the cache if a mutation dropped it.
func (n *node) sortedNames() []string {
	if n.sorted == nil {
		names := make([]string, 0, len(n.children))
		for name := range n.children {
			names = append(names, name)
		}
		sort.Strings(names)
		n.sorted = &nameCache{names: names}
	}
	return n.sorted.names
}

// Engine is the namespace of one partition. See the package doc for the
// ownership rule: one goroutine, no locks.
type Engine struct {
	part  uint16
	root  Ino
	nodes map[Ino]*node
	next  uint64 // next local inode number to hand out
	used  uint64 // bytes in regular files, for Statfs

	// The data path (see chunks.go, slices.go, garbage.go, open.go).
	nextSlice     uint64                  // next local slice number to hand out
	pending       []*allocBatch           // allocated slice ids not all used yet, by first id
	shared        map[uint64]uint32       // slice ids used by more than one chunk: uses beyond the first
	garbage       map[uint64]garbageEntry // slices no file uses, until purged
	garbageSorted []uint64                // garbage ids in order; nil when stale
	orphans       map[Ino]struct{}        // regular files with no links, kept while open
	opens         map[Ino]uint32          // open counts; not checkpointed, not logged
	holdOrphans   bool                    // keep every file whose last link goes (recovery)
}

// initData sets up the data path's state of a new or loaded engine.
func (e *Engine) initData() {
	e.nextSlice = 1
	e.shared = make(map[uint64]uint32)
	e.garbage = make(map[uint64]garbageEntry)
	e.orphans = make(map[Ino]struct{})
	e.opens = make(map[Ino]uint32)
}

// New returns an engine holding an empty namespace for partition p: a root
// directory owned by root with mode 0755, created at time now.
func New(p uint16, now int64) *Engine {
	e := &Engine{part: p, root: RootIno(p), nodes: make(map[Ino]*node), next: 2}
	e.initData()
	root := &node{
		attr: Attr{
			Ino: e.root, Mode: S_IFDIR | 0o755, Nlink: 2, Size: dirSize,
			Atime: now, Mtime: now, Ctime: now,
		},
		parent:   e.root,
		children: make(map[string]Ino),
	}
	e.nodes[e.root] = root
	return e
}

// Partition returns the partition this engine serves.
func (e *Engine) Partition() uint16 { return e.part }

// Root returns the inode number of the root directory.
func (e *Engine) Root() Ino { return e.root }

// Len returns the number of nodes, the root included.
func (e *Engine) Len() int { return len(e.nodes) }

// get returns the node ino, or ENOENT.
func (e *Engine) get(ino Ino) (*node, error) {
	n, ok := e.nodes[ino]
	if !ok {
		return nil, syscall.ENOENT
	}
	return n, nil
}

// dir returns the directory ino, or ENOENT / ENOTDIR.
func (e *Engine) dir(ino Ino) (*node, error) {
	n, err := e.get(ino)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, syscall.ENOTDIR
	}
	return n, nil
}

// alloc hands out the next inode number of the partition.
func (e *Engine) alloc() Ino {
	ino := MakeIno(e.part, e.next)
	e.next++
	return ino
}

// addEntry links name -> ino into dir d and updates d's times.
func (d *node) addEntry(name string, ino Ino, now int64) {
	d.children[name] = ino
	d.sorted = nil
	d.attr.Mtime, d.attr.Ctime = now, now
}

// removeEntry unlinks name from dir d and updates d's times.
func (d *node) removeEntry(name string, now int64) {
	delete(d.children, name)
	d.sorted = nil
	d.attr.Mtime, d.attr.Ctime = now, now
}

// dropLink removes one link to n; a node with no links left is freed,
// and its slices become garbage at now, unless it is a regular file that
// is open (or orphans are held): then it stays as an orphan until the
// last Close.
func (e *Engine) dropLink(n *node, now int64) {
	if n.isDir() {
		n.attr.Nlink = 0
	} else {
		n.attr.Nlink--
	}
	n.attr.Ctime = now
	if n.attr.Nlink == 0 {
		if n.attr.Mode&S_IFMT == S_IFREG && (e.holdOrphans || e.opens[n.attr.Ino] > 0) {
			e.orphans[n.attr.Ino] = struct{}{}
			return
		}
		e.freeNode(n, now)
	}
}
