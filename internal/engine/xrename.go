package engine

import (
	"bytes"
	"fmt"
	"slices"
	"syscall"
)

// Rename across partitions (docs/rebalance.md, "Rename and link across
// partitions"). A rename whose source entry is in this partition and
// whose target entry is in another runs as two phases, each step a logged
// operation of both engines:
//
//  1. the source prepares (XPrepareSource): it checks the source entry and
//     logs a prepared source intent;
//  2. the target prepares (XPrepareTarget): it checks the target entry
//     and logs a prepared target intent, which reserves the target name
//     (and, for an exchange, pins the target node and returns its image);
//  3. the source commits (XCommitSource): the decision. The source node
//     leaves its entry (for an exchange, the target's node arrives in it)
//     and the intent, now committed, keeps the source node's image;
//  4. the target commits (XCommitTarget) with that image: the node arrives
//     at the target entry (replacing what was there) and the target
//     intent goes;
//  5. the source forgets its committed intent (XForget).
//
// The source is the coordinator of record: the rename happened exactly if
// the source committed. A prepared intent can be aborted (XAbort) until
// then; a committed one only forgotten, after step 4. A target intent
// whose source holds no intent was aborted. Whoever finishes an intent
// (the router that ran it, or any router's recovery pass) reads the state
// of both sides (XIntentState, XIntents), so every step is idempotent.
//
// A node moves as its image: attributes, content (the slice references;
// the objects stay where they are, and their garbage is the holder's),
// xattrs; it gets an inode number of the partition it arrives in. Only
// non-directories move, with one link, not open, and with no slice shared
// with another file of the partition (EXDEV otherwise).

// Intent roles.
const (
	XSource = 1 // the partition of the source entry: the coordinator of record
	XTarget = 2 // the partition of the target entry
)

// Intent states (XIntentState returns XNone for an intent it does not hold).
const (
	XNone      = 0
	XPrepared  = 1
	XCommitted = 2
	// XDone is a source intent forgotten after the target committed: the
	// source keeps its id, so that a client's retry of the rename (the
	// router derives the id from the client's call) is answered as done
	// instead of being run again. The oldest go beyond maxDone.
	XDone = 3
)

// maxDone bounds the done intents a partition remembers.
const maxDone = 4096

// XIDLen is the length of an intent id.
const XIDLen = 16

// maxIntents bounds the intents one partition holds (EAGAIN beyond).
const maxIntents = 1 << 16

// XID names an intent in both partitions.
type XID [XIDLen]byte

// XChunk is one chunk of a moving node's content.
type XChunk struct {
	Index  uint32
	Slices []Slice
}

// XXattr is one extended attribute of a moving node.
type XXattr struct {
	Name  string
	Value []byte
}

// XNode is the image of a node moving between partitions; a directory's
// carries its subtree (xrename_tree.go).
type XNode struct {
	Attr   Attr // Ino and Nlink are ignored
	Target string
	Xattrs []XXattr // in name order
	Chunks []XChunk // in chunk order
	// Inline is, in an image arriving, the bytes of those of its slices
	// the sending partition still held inline (ImageInline); they are not
	// kept in intents: a partition sending a node keeps them in its own
	// inline slices until it forgets the intent.
	Inline []InlineSlice
	// Entries is, for a directory, its entries in name order.
	Entries []XEntry
}

// Intent is one side's record of a rename across partitions. It is
// replaced, never changed in place (a freeze shares the list).
type Intent struct {
	ID     XID
	Role   uint8
	State  uint8
	Peer   uint16
	Parent Ino
	Name   string
	Flags  uint32
	Ino    Ino    // the node the entry named at prepare (0: none)
	At     int64  // when it was prepared
	Image  *XNode // a committed source intent: the node sent to the target
}

// xrenameState is the engine's intents, in id order, and what they pin.
type xrenameState struct {
	list  []*Intent          // sorted by id; replaced on every change
	done  int                // intents of list in state XDone
	names map[xname]struct{} // target entries reserved by prepared target intents
	nodes map[Ino]struct{}   // target nodes of prepared exchanges: their content must not change
}

type xname struct {
	dir  Ino
	name string
}

// Intents returns the intents this partition holds, in id order. The
// slice and its intents must not be changed.
func (e *Engine) Intents() []*Intent { return e.xr.list }

// IntentState returns the state of intent id here (XNone if not held).
func (e *Engine) IntentState(id XID) uint8 {
	if in := e.intent(id); in != nil {
		return in.State
	}
	return XNone
}

func (e *Engine) intent(id XID) *Intent {
	i, ok := slices.BinarySearchFunc(e.xr.list, id, func(in *Intent, id XID) int { return bytes.Compare(in.ID[:], id[:]) })
	if !ok {
		return nil
	}
	return e.xr.list[i]
}

// setIntent adds or replaces in (nil: removes id) and rebuilds the pins.
func (e *Engine) setIntent(id XID, in *Intent) {
	list := slices.Clone(e.xr.list)
	i, ok := slices.BinarySearchFunc(list, id, func(in *Intent, id XID) int { return bytes.Compare(in.ID[:], id[:]) })
	switch {
	case in == nil && ok:
		list = slices.Delete(list, i, i+1)
	case in != nil && ok:
		list[i] = in
	case in != nil:
		list = slices.Insert(list, i, in)
	}
	if len(list) == 0 {
		list = nil
	}
	e.xr.list = list
	e.repin()
	if e.xr.done > maxDone {
		e.trimDone()
	}
}

// trimDone drops the oldest half of the done intents.
func (e *Engine) trimDone() {
	var times []int64
	for _, in := range e.xr.list {
		if in.State == XDone {
			times = append(times, in.At)
		}
	}
	slices.Sort(times)
	cut := times[len(times)/2]
	list := make([]*Intent, 0, len(e.xr.list))
	for _, in := range e.xr.list {
		if in.State != XDone || in.At > cut {
			list = append(list, in)
		}
	}
	e.xr.list = list
	e.repin()
}

// repin rebuilds the pins from the intents, and counts the done ones.
func (e *Engine) repin() {
	e.xr.names, e.xr.nodes, e.xr.done = nil, nil, 0
	for _, in := range e.xr.list {
		if in.State == XDone {
			e.xr.done++
		}
		if in.Role != XTarget || in.State != XPrepared {
			continue
		}
		if e.xr.names == nil {
			e.xr.names = make(map[xname]struct{})
		}
		e.xr.names[xname{in.Parent, in.Name}] = struct{}{}
		if in.Flags&(RenameExchange|xDirFlag) != 0 && in.Ino != 0 {
			if e.xr.nodes == nil {
				e.xr.nodes = make(map[Ino]struct{})
			}
			e.xr.nodes[in.Ino] = struct{}{}
			if n := e.st.peek(in.Ino); in.Flags&RenameExchange != 0 && n != nil && n.isDir() {
				e.eachBelow(n, func(b *node) { e.xr.nodes[b.Ino] = struct{}{} }) // its image went to the source: nothing in it may change
			}
		}
	}
}

// reserved reports whether entry name of directory dir is reserved by a
// rename across partitions in progress: it must not change until then.
func (e *Engine) reserved(dir Ino, name string) bool {
	if e.xr.names == nil {
		return false
	}
	_, ok := e.xr.names[xname{dir, name}]
	return ok
}

// pinned reports whether node ino's content must not change: it is about
// to move to another partition in an exchange.
func (e *Engine) pinned(ino Ino) bool {
	if e.xr.nodes == nil {
		return false
	}
	_, ok := e.xr.nodes[ino]
	return ok
}

// movable checks that non-directory n can move to another partition.
func (e *Engine) movable(n *node) error {
	switch {
	case n.isDir():
		return fmt.Errorf("directory %d: %w", n.Ino, syscall.EXDEV)
	case n.Nlink != 1:
		return fmt.Errorf("node %d has %d links: %w", n.Ino, n.Nlink, syscall.EXDEV)
	case e.opens[n.Ino] > 0:
		return fmt.Errorf("node %d is open: %w", n.Ino, syscall.EBUSY)
	case e.pinned(n.Ino):
		return fmt.Errorf("node %d is moving: %w", n.Ino, syscall.EBUSY)
	}
	for _, ch := range e.chunks(n) {
		for _, s := range ch.slices {
			if e.shared[s.ID] > 0 {
				return fmt.Errorf("node %d shares slice %d with another file: %w", n.Ino, s.ID, syscall.EXDEV)
			}
		}
	}
	return nil
}

// renameEntry runs Rename's checks of one side's entry: the directory,
// search permission and the name.
func (e *Engine) renameEntry(c Cred, parent Ino, name string) (*node, error) {
	d, err := e.dir(parent)
	if err != nil {
		return nil, err
	}
	if err := e.access(c, d, mayExec); err != nil {
		return nil, err
	}
	if isDot(name) {
		return nil, syscall.EBUSY
	}
	if err := checkSyntax(name); err != nil {
		return nil, err
	}
	if err := checkLen(name); err != nil {
		return nil, err
	}
	return d, nil
}

// XSourceNode is what the source's prepare says of its node.
type XSourceNode struct {
	Ino   Ino
	State uint8 // of an intent held already (a retry); XNone otherwise
	Dir   bool
	Size  XSize // a directory's subtree
}

// XPrepareSource is step 1 at the source: entry name of parent must
// exist, be able to move (a directory with its subtree, xrename_tree.go;
// busy names the namespace's mount points in this partition) and c may
// remove it; the intent is logged as prepared. Preparing an intent this
// side already holds (a retry) changes nothing and returns the intent's
// state.
func (e *Engine) XPrepareSource(c Cred, id XID, parent Ino, name string, flags uint32, peer uint16, busy []Ino, now int64) (XSourceNode, error) {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return XSourceNode{}, syscall.EINVAL
	}
	if in := e.intent(id); in != nil {
		if in.Role != XSource {
			return XSourceNode{}, fmt.Errorf("intent held as the target: %w", syscall.EEXIST)
		}
		return XSourceNode{Ino: in.Ino, State: in.State}, nil
	}
	return e.prepareSource(c, id, parent, name, flags, peer, busy, now)
}

func (e *Engine) prepareSource(c Cred, id XID, parent Ino, name string, flags uint32, peer uint16, busy []Ino, now int64) (XSourceNode, error) {
	if len(e.xr.list)-e.xr.done >= maxIntents {
		return XSourceNode{}, syscall.EAGAIN
	}
	od, err := e.renameEntry(c, parent, name)
	if err != nil {
		return XSourceNode{}, err
	}
	_, src := e.child(od, name)
	if src == nil {
		return XSourceNode{}, syscall.ENOENT
	}
	if e.reserved(od.Ino, name) {
		return XSourceNode{}, syscall.EBUSY
	}
	if err := e.removeCheck(od, src); err != nil {
		return XSourceNode{}, err // the snapshot area is read only
	}
	if err := e.mayDelete(c, od, src); err != nil {
		return XSourceNode{}, err
	}
	if src.isDir() {
		if err := e.access(c, src, mayWrite); err != nil {
			return XSourceNode{}, err // its ".." changes, as in Rename
		}
	}
	size, err := e.movableAny(src, busy)
	if err != nil {
		return XSourceNode{}, err
	}
	e.setIntent(id, &Intent{ID: id, Role: XSource, State: XPrepared, Peer: peer, Parent: od.Ino, Name: name,
		Flags: flags, Ino: src.Ino, At: now})
	return XSourceNode{Ino: src.Ino, Dir: src.isDir(), Size: size}, nil
}

// XPrepareTarget is step 2 at the target: the checks of Rename for the
// target entry (given that the source is a directory or not), then the
// intent is logged and the entry reserved. For an exchange the target
// node is pinned and its image returned. A directory arriving (srcDir)
// brings size (its subtree, as the source counted it): the inode numbers
// and directory quotas here must have room for it; an empty directory
// it replaces is pinned, so that nothing is made in it meanwhile.
//
// In an exchange the target node moves to the source, a directory with its
// subtree: busy names the namespace's mount points in this partition, and
// the whole subtree is pinned until the intent goes.
func (e *Engine) XPrepareTarget(c Cred, id XID, parent Ino, name string, flags uint32, peer uint16, srcDir bool, size XSize, busy []Ino, now int64) (*XNode, error) {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return nil, syscall.EINVAL
	}
	exchange := flags&RenameExchange != 0
	if in := e.intent(id); in != nil {
		if in.Role != XTarget {
			return nil, fmt.Errorf("intent held as the source: %w", syscall.EEXIST)
		}
		if exchange && in.State == XPrepared {
			return e.treeImageOf(e.node(in.Ino)), nil
		}
		return nil, nil
	}
	if len(e.xr.list)-e.xr.done >= maxIntents {
		return nil, syscall.EAGAIN
	}
	if e.inl.bytes > 2*MaxInlineBytes {
		// Nodes arriving bring their inline bytes past the limit new
		// commits keep to; twice that is as far as they may: the
		// flusher is not keeping up (or not running).
		return nil, syscall.ENOBUFS
	}
	if isDot(name) && flags&RenameNoReplace != 0 {
		return nil, syscall.EEXIST
	}
	nd, err := e.renameEntry(c, parent, name)
	if err != nil {
		return nil, err
	}
	_, dst := e.child(nd, name)
	switch {
	case flags&RenameNoReplace != 0 && dst != nil:
		return nil, syscall.EEXIST
	case exchange && dst == nil:
		return nil, syscall.ENOENT
	}
	if srcDir && (size.Nodes == 0 || size.Nodes > MaxMoveNodes) {
		return nil, fmt.Errorf("a directory of %d nodes: %w", size.Nodes, syscall.EINVAL)
	}
	if e.reserved(nd.Ino, name) || e.pinned(nd.Ino) {
		return nil, syscall.EBUSY
	}
	if dst != nil {
		err = e.removeCheck(nd, dst)
	} else {
		err = e.entryCheck(nd, name)
	}
	if err != nil {
		return nil, err // the snapshot area is read only
	}
	var ino Ino
	var image *XNode
	if dst == nil {
		if err := e.access(c, nd, mayWrite|mayExec); err != nil {
			return nil, err
		}
		if err := e.roomFor(nd, srcDir, size); err != nil {
			return nil, err
		}
	} else {
		ino = dst.Ino
		if err := e.mayDelete(c, nd, dst); err != nil {
			return nil, err
		}
		switch {
		case exchange:
		case !srcDir && dst.isDir():
			return nil, syscall.EISDIR
		case srcDir && !dst.isDir():
			return nil, syscall.ENOTDIR
		case srcDir && e.st.extraOf(dst).dir.live > 0:
			return nil, syscall.ENOTEMPTY
		case srcDir && e.pinned(dst.Ino):
			return nil, syscall.EBUSY
		}
		if srcDir && !exchange {
			if err := e.roomFor(nd, srcDir, XSize{Nodes: size.Nodes - 1, Bytes: size.Bytes}); err != nil {
				return nil, err // the directory replaced frees one node
			}
		}
		if exchange {
			if dst.isDir() {
				if err := e.access(c, dst, mayWrite); err != nil {
					return nil, err // its ".." changes, as in Rename
				}
			}
			if _, err := e.movableAny(dst, busy); err != nil {
				return nil, err
			}
			if srcDir {
				if err := e.roomFor(nd, srcDir, size); err != nil {
					return nil, err
				}
			}
			image = e.treeImageOf(dst)
		}
	}
	if srcDir {
		flags |= xDirFlag
	}
	e.setIntent(id, &Intent{ID: id, Role: XTarget, State: XPrepared, Peer: peer, Parent: nd.Ino, Name: name,
		Flags: flags, Ino: ino, At: now})
	return image, nil
}

// roomFor checks that a node arriving in directory nd (srcDir: a
// directory's subtree of size) fits the inode numbers and the directory
// quotas here.
func (e *Engine) roomFor(nd *node, srcDir bool, size XSize) error {
	if !srcDir {
		if e.next >= 1<<localBits {
			return syscall.ENOSPC
		}
		_, err := e.quotaCreate(nd)
		return err
	}
	if e.next+size.Nodes > 1<<localBits {
		return syscall.ENOSPC
	}
	return e.quotaCheck(e.regionOf(nd), size.Nodes, size.Bytes)
}

// XCommitSource is step 3, the decision: the source node leaves its entry
// (for an exchange, the target's node, image in, takes its place) and the
// intent is committed, keeping the source node's image, which it returns.
// An intent not held (aborted) is ENOENT; one committed before returns
// its image again. If the source entry no longer names the node prepared,
// or the node can no longer move (busy: as for XPrepareSource), the
// commit fails and changes nothing.
func (e *Engine) XCommitSource(id XID, in *XNode, busy []Ino, now int64) (*XNode, error) {
	it := e.intent(id)
	if it == nil || it.Role != XSource {
		return nil, fmt.Errorf("no source intent (aborted): %w", syscall.ETIMEDOUT)
	}
	switch it.State {
	case XCommitted:
		return it.Image, nil
	case XDone:
		return nil, nil // finished: the caller has nothing left to do
	}
	exchange := it.Flags&RenameExchange != 0
	if exchange != (in != nil) {
		return nil, fmt.Errorf("exchange image: %w", syscall.EINVAL)
	}
	od, err := e.dir(it.Parent)
	if err != nil {
		return nil, fmt.Errorf("source directory: %w", err)
	}
	_, src := e.child(od, it.Name)
	if src == nil || src.Ino != it.Ino {
		return nil, fmt.Errorf("source entry changed: %w", syscall.ENOENT)
	}
	if _, err := e.movableAny(src, busy); err != nil {
		return nil, err
	}
	if in != nil {
		if err := checkImage(in); err != nil {
			return nil, err
		}
		if in.isDir() {
			if err := e.roomFor(od, true, in.size()); err != nil {
				return nil, err
			}
		} else if e.next >= 1<<localBits {
			return nil, syscall.ENOSPC // one node for another: no quota grows
		}
	}
	image := e.treeImageOf(src)
	e.sendInline(image.AllChunks())
	if in != nil {
		nslot := e.arriveTree(od, in, now)
		od = e.node(od.Ino) // the store may have moved it
		e.entriesMut(od).replace(it.Name, nslot)
		od.Mtime, od.Ctime = now, now
		if in.isDir() {
			od.Nlink++
		}
	} else {
		e.removeEntry(od, it.Name, now)
	}
	if src.isDir() {
		od.Nlink--
	}
	e.departTree(src, it.Peer)
	done := *it
	done.State, done.Image = XCommitted, image
	e.setIntent(id, &done)
	return image, nil
}

// XCommitTarget is step 4: the source node (image) arrives at the target
// entry, replacing what was there (for an exchange, that node left for
// the source), and the intent goes. An intent not held was committed
// before: nothing happens.
func (e *Engine) XCommitTarget(id XID, image *XNode, now int64) error {
	it := e.intent(id)
	if it == nil {
		return nil
	}
	if it.Role != XTarget {
		return fmt.Errorf("intent held as the source: %w", syscall.EINVAL)
	}
	if image == nil {
		return fmt.Errorf("no image: %w", syscall.EINVAL)
	}
	if err := checkImage(image); err != nil {
		return err
	}
	nd, err := e.dir(it.Parent)
	if err != nil {
		return fmt.Errorf("target directory: %w", err) // cannot happen: the entry is reserved
	}
	if image.isDir() != (it.Flags&xDirFlag != 0) {
		return fmt.Errorf("image of mode %o for intent of flags %#x: %w", image.Attr.Mode, it.Flags, syscall.EINVAL)
	}
	e.setIntent(id, nil) // unpins, so that the node may leave
	nslot := e.arriveTree(nd, image, now)
	if image.isDir() {
		nd = e.node(nd.Ino) // the store may have moved it
		nd.Nlink++
	}
	if _, dst := e.child(nd, it.Name); dst != nil {
		switch {
		case it.Flags&RenameExchange != 0:
			e.dropInlineBelow(dst) // sent to the source with the prepare's image
			if dst.isDir() {
				nd.Nlink--
			}
			e.departTree(dst, it.Peer)
		case dst.isDir(): // empty: pinned since the prepare
			nd.Nlink--
			e.dropLink(dst, now)
		default:
			e.dropLink(dst, now)
		}
		e.entriesMut(nd).replace(it.Name, nslot)
		nd.Mtime, nd.Ctime = now, now
	} else {
		e.addEntry(nd, it.Name, nslot, now)
	}
	return nil
}

// XAbort drops a prepared intent; one not held is already gone, a
// committed source intent cannot be aborted (EBUSY).
func (e *Engine) XAbort(id XID) error {
	it := e.intent(id)
	if it == nil {
		return nil
	}
	switch it.State {
	case XCommitted:
		return fmt.Errorf("intent committed: %w", syscall.EBUSY)
	case XDone:
		return nil
	}
	e.setIntent(id, nil)
	return nil
}

// XForget marks a committed source intent done once the target has
// committed (its image goes; its id stays, for retries); a prepared one
// must be committed or aborted first (EBUSY).
func (e *Engine) XForget(id XID, now int64) error {
	it := e.intent(id)
	if it == nil || it.State == XDone {
		return nil
	}
	if it.State != XCommitted {
		return fmt.Errorf("intent not committed: %w", syscall.EBUSY)
	}
	e.forgetSent(it.Image.AllChunks())
	done := *it
	done.State, done.Image, done.At = XDone, nil, now
	e.setIntent(id, &done)
	return nil
}

// checkIntents is the invariant check's part for intents: sorted, unique,
// well formed; a prepared source intent names a node; a target intent
// reserves an entry of a directory; a committed source intent has an
// image.
func (e *Engine) checkIntents() error {
	for i, in := range e.xr.list {
		if i > 0 && bytes.Compare(e.xr.list[i-1].ID[:], in.ID[:]) >= 0 {
			return fmt.Errorf("intents out of order at %x", in.ID)
		}
		if in.Role != XSource && in.Role != XTarget || in.State < XPrepared || in.State > XDone ||
			in.Role == XTarget && in.State != XPrepared || in.State == XDone && in.Image != nil {
			return fmt.Errorf("intent %x: role %d state %d", in.ID, in.Role, in.State)
		}
		if checkSyntax(in.Name) != nil || checkLen(in.Name) != nil || isDot(in.Name) {
			return fmt.Errorf("intent %x: bad name %q", in.ID, in.Name)
		}
		if d := e.st.peek(in.Parent); in.State == XPrepared && (d == nil || !d.isDir()) {
			return fmt.Errorf("intent %x: directory %d missing", in.ID, in.Parent)
		}
		if in.State == XCommitted && in.Image == nil {
			return fmt.Errorf("intent %x: committed without an image", in.ID)
		}
		if in.Role == XTarget && in.Ino != 0 {
			d := e.st.peek(in.Parent)
			slot := e.entries(d).lookup(in.Name)
			if slot == 0 || e.peekAt(slot).Ino != in.Ino {
				return fmt.Errorf("intent %x: entry %q of %d does not name %d", in.ID, in.Name, in.Parent, in.Ino)
			}
		}
	}
	return nil
}
