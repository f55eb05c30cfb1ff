package engine

import "syscall"

// nominal capacity reported by Statfs until the data path reports real use.
const (
	nominalBytes  = 1 << 50 // 1 PiB
	nominalInodes = 1 << 40
	blockSize     = 4096
	dirSize       = 4096 // st_size of a directory, as on ext4
)

// Engine is the namespace of one partition. See the package doc for the
// ownership rule: one goroutine, no locks.
type Engine struct {
	part uint16
	root Ino
	st   store  // the nodes; see store.go
	next uint64 // next local inode number to hand out
	used uint64 // bytes in regular files, for Statfs

	tables Tables          // the federation tables (partition 0 only); see tables.go
	quota  quotaState      // directory quotas; see quota.go
	oq     ownerQuotaState // user and group quotas; see quota_owner.go

	trash trashState // the trash; see trash.go
	snap  snapState  // the snapshots; see snapshot_state.go

	xr xrenameState // renames across partitions in progress; see xrename.go

	fwd forwardState // numbers of nodes that moved in or out; see forward.go

	inl inlineState // the bytes of inline slices; see inline.go

	// The data path (see chunks.go, slices.go, garbage.go, open.go).
	nextSlice     uint64                  // next local slice number to hand out
	pending       []*allocBatch           // allocated slice ids not all used yet, by first id
	shared        map[uint64]uint32       // slice ids used by more than one chunk: uses beyond the first
	garbage       map[uint64]garbageEntry // slices no file uses, until purged
	garbageSorted []uint64                // garbage ids in order; nil when stale
	orphans       map[Ino]struct{}        // regular files with no links, kept while open
	opens         map[Ino]uint32          // open counts; not in the engine checkpoint (RestoreOpens)
	holdOrphans   bool                    // keep every file whose last link goes (recovery)

	// Freezes (freeze.go).
	freezes    int    // freezes live
	epoch      uint32 // the latest freeze's epoch
	cow        uint32 // while a freeze is live: epoch; 0 otherwise
	pendingGen uint32 // the epoch at which pending was made the engine's own
	garbageGen uint32 // the epoch at which garbage was made the engine's own
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
	e := &Engine{part: p, root: RootIno(p), next: 2, tables: tablesFor(p)}
	e.initData()
	_, root := e.st.add(e.root)
	root.Mode, root.Nlink, root.Size = S_IFDIR|0o755, 2, dirSize
	root.Atime, root.Mtime, root.Ctime = now, now, now
	x := e.st.extra(root)
	x.parent = e.root
	x.dir = &dirents{}
	return e
}

// Partition returns the partition this engine serves.
func (e *Engine) Partition() uint16 { return e.part }

// Root returns the inode number of the root directory.
func (e *Engine) Root() Ino { return e.root }

// Len returns the number of nodes, the root included.
func (e *Engine) Len() int { return e.st.len() }

// The node getters come in two kinds. get, dir, node, at and child return
// nodes for writing: while a freeze is live, the chunk a node lies in is
// copied before the first write (slab.mut), so every operation that
// changes anything fetches its nodes with them, and a node fetched so
// stays valid for the rest of the operation. The peek getters are for
// operations that change nothing, and cost nothing more than a lookup.

// get returns the node ino, or ENOENT.
func (e *Engine) get(ino Ino) (*node, error) {
	n := e.st.get(ino)
	if n == nil {
		return nil, syscall.ENOENT
	}
	return n, nil
}

// peek is get for reading only.
func (e *Engine) peek(ino Ino) (*node, error) {
	n := e.st.peek(ino)
	if n == nil {
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

// peekDir is dir for reading only.
func (e *Engine) peekDir(ino Ino) (*node, error) {
	n, err := e.peek(ino)
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

// node returns the node ino, which must exist.
func (e *Engine) node(ino Ino) *node { return e.st.get(ino) }

// at returns the node in slot, which must be live.
func (e *Engine) at(slot uint32) *node { return e.st.atSlot(slot) }

// peekAt is at for reading only.
func (e *Engine) peekAt(slot uint32) *node { return e.st.peekSlot(slot) }

// entries returns directory d's entries, marked used and inflated, for
// reading; entriesMut is for changing them.
func (e *Engine) entries(d *node) *dirents {
	x := e.st.extraOf(d)
	if x.dir.packed != nil && x.gen < e.cow {
		// Inflating changes the header a live freeze reads.
		x = e.st.extraMutAt(d.aux)
	}
	return e.touch(x.dir)
}

// entriesMut returns directory d's entries, marked used and inflated, for
// changing them.
func (e *Engine) entriesMut(d *node) *dirents { return e.touch(e.st.extraMut(d).dir) }

// parentOf returns the inode number of directory d's parent.
func (e *Engine) parentOf(d *node) Ino { return e.st.extraOf(d).parent }

// child returns the node that entry name of directory d names, and its
// slot, or nil.
func (e *Engine) child(d *node, name string) (uint32, *node) {
	slot := e.entries(d).lookup(name)
	if slot == 0 {
		return 0, nil
	}
	return slot, e.at(slot)
}

// peekChild is child for reading only.
func (e *Engine) peekChild(d *node, name string) (uint32, *node) {
	slot := e.entries(d).lookup(name)
	if slot == 0 {
		return 0, nil
	}
	return slot, e.peekAt(slot)
}

// addEntry links name -> slot into dir d and updates d's times.
func (e *Engine) addEntry(d *node, name string, slot uint32, now int64) {
	e.entriesMut(d).add(name, slot)
	d.Mtime, d.Ctime = now, now
}

// removeEntry unlinks name from dir d and updates d's times.
func (e *Engine) removeEntry(d *node, name string, now int64) {
	e.entriesMut(d).remove(name)
	d.Mtime, d.Ctime = now, now
}

// dropLink removes one link to n; a node with no links left is freed,
// and its slices become garbage at now, unless it is a regular file that
// is open (or orphans are held): then it stays as an orphan until the
// last Close.
func (e *Engine) dropLink(n *node, now int64) {
	if n.isDir() {
		n.Nlink = 0
	} else {
		n.Nlink--
	}
	n.Ctime = now
	if n.Nlink == 0 {
		if e.quota.dirs != nil || e.ownerQuotasOn() {
			e.quotaGone(n)
		}
		if n.Mode&S_IFMT == S_IFREG && (e.holdOrphans || e.opens[n.Ino] > 0) {
			e.orphans[n.Ino] = struct{}{}
			return
		}
		e.freeNode(n, now)
	}
}
