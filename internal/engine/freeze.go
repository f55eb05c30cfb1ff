package engine

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
)

// A freeze is a point-in-time view of the namespace that costs its owner
// only a hand-over: Freeze copies no node, entry or slice. It shares the
// engine's memory, and from then on the engine copies what it is about
// to change, once, before changing it, so that the frozen view keeps what
// was there at the freeze (copy on write):
//
//   - the slabs (nodes, extra records, singles): a chunk of records is
//     copied at the first write to it (slab.mut); reads never check; a
//     page of a slab's chunk table, at the first change of an entry in it
//     (pagedTable.set);
//   - an extra record's directory entries, xattrs and file data: when the
//     record is first changed (store.extraMut) the engine gives it its own
//     dirents header, xattr map and chunk lists; a directory's entry
//     buffer itself is copied only when an entry is overwritten in place
//     (dirents.ownBuf), since appending writes past what the freeze sees;
//   - the node slab's free list, the pending slice batches, the garbage
//     list and the inline slices' map: copied at their first change;
//   - the owner pairs, few, are copied at the freeze; the federation tables
//     are replaced, never changed in place, so the freeze shares them.
//
// Whether something is shared is told by epochs: every Freeze starts a new
// one, what the engine makes or copies is stamped with the epoch it was
// made in, and while any freeze is live what is stamped below the latest
// freeze's epoch is shared (the compare is against 0, never true, when
// none is).

// ErrReleased reports a frozen view used after Release.
var ErrReleased = errors.New("engine: frozen view already released")

// Frozen is the namespace as it stood at a Freeze. Its WriteCheckpoint may
// run on any goroutine, once, while the engine's owner goes on applying
// operations; Release, on the owner goroutine, ends it.
type Frozen struct {
	src      *Engine // the engine it was taken from
	view     *Engine // the state at the freeze; written by no one
	released bool
	top      uint32 // for a subtree's dump, the slot of its top (subtree.go); 0: the whole namespace
	nodes    int    // for a subtree's dump, the nodes WriteCheckpoint wrote
}

// Freeze returns the namespace as it stands now, without copying it. It
// runs on the owner goroutine; the cost is a copy of the slabs' chunk
// tables' page lists (one pointer per 1,024 chunks of 146 records:
// paged_table.go) and of the owner pairs. Several
// freezes may be live at once. Each must be released (Release) for the
// engine to stop copying what it changes.
func (e *Engine) Freeze() *Frozen {
	e.epoch++
	v := &Engine{
		part: e.part, root: e.root, next: e.next, used: e.used,
		tables:    e.tables,
		quota:     quotaState{list: e.quota.list},
		oq:        ownerQuotaState{list: e.oq.list},
		xr:        xrenameState{list: e.xr.list},
		nextSlice: e.nextSlice, pending: e.pending,
		garbage: e.garbage, garbageSorted: e.garbageSorted,
		inl: inlineState{data: e.inl.data, bytes: e.inl.bytes, sent: e.inl.sent},
		fwd: forwardState{m: e.fwd.m, order: e.fwd.order, seq: e.fwd.seq},
	}
	v.st.nodes = e.st.nodes.frozen()
	v.st.extras = e.st.extras.frozen()
	v.st.singles = e.st.singles.frozen()
	v.st.owners.pairs = slices.Clone(e.st.owners.pairs)
	v.st.idle.ro = 1 // nodes kept in packed directories are read, never inflated
	e.freezes++
	e.setCow(e.epoch)
	return &Frozen{src: e, view: v}
}

// WriteCheckpoint writes the namespace as it stood at the freeze: exactly
// the bytes the engine's WriteCheckpoint would have written then (for
// FreezeSubtree, the subtree's checkpoint, subtree.go). It may
// run on any goroutine, concurrently with the engine's owner, but not
// after Release.
func (f *Frozen) WriteCheckpoint(w io.Writer) error {
	if f.released {
		return fmt.Errorf("write checkpoint: %w", ErrReleased)
	}
	f.view.st.nodes.flatten()
	f.view.st.extras.flatten()
	f.view.st.singles.flatten()
	if f.top != 0 {
		n, err := f.view.writeSubtree(w, f.top)
		f.nodes = n
		return err
	}
	return f.view.WriteCheckpoint(w)
}

// Nodes returns the number of nodes the frozen view's checkpoint holds:
// for a subtree's (FreezeSubtree), known once WriteCheckpoint has
// returned. It may run on any goroutine, not after Release.
func (f *Frozen) Nodes() int {
	if f.top != 0 {
		return f.nodes
	}
	if f.view == nil {
		return 0
	}
	return f.view.st.len()
}

// Release ends the freeze: once no freeze is live, the engine writes in
// place again. It runs on the owner goroutine, after WriteCheckpoint has
// returned (or instead of calling it). Releasing twice does nothing.
func (f *Frozen) Release() {
	if f.released {
		return
	}
	f.released = true
	f.view = nil
	e := f.src
	if e.freezes--; e.freezes == 0 {
		e.setCow(0)
	}
}

// Freezes returns the number of freezes live.
func (e *Engine) Freezes() int { return e.freezes }

// setCow makes everything stamped below cow shared (0: nothing is).
func (e *Engine) setCow(cow uint32) {
	e.cow = cow
	e.st.nodes.stamp(e.epoch, cow)
	e.st.extras.stamp(e.epoch, cow)
	e.st.singles.stamp(e.epoch, cow)
}

func (s *slab[T]) stamp(epoch, cow uint32) { s.epoch, s.cow = epoch, cow }

// frozen returns the slab's state for a freeze: its own list of the pages
// of its table (flatten makes the table from them), and the free list,
// shared until the slab next changes it.
func (s *slab[T]) frozen() slab[T] {
	return slab[T]{pages: s.pages.frozen(), ghosts: s.ghosts.frozen(), free: s.free, next: s.next, live: s.live}
}

// flatten makes a frozen slab's table of chunks from its pages, on the
// goroutine that is about to read it (not the engine's owner: at 100
// million nodes the node slab's table is 5 MB).
func (s *slab[T]) flatten() {
	s.chunks = make([]*[slabChunk]T, s.pages.len())
	for c, v := range s.pages.all {
		s.chunks[c] = v
	}
}

// unshare gives x its own directory entries header, xattr map and chunk
// lists, leaving those a live freeze holds as they are, and stamps it.
func (x *extra) unshare(epoch uint32) {
	if x.dir != nil {
		d := *x.dir
		d.bufShared = d.buf != nil
		x.dir = &d
	}
	if x.xattrs != nil {
		// Values are replaced, never changed in place: the map is all.
		x.xattrs = maps.Clone(x.xattrs)
	}
	if x.file != nil {
		cs := slices.Clone(x.file.chunks)
		for i := range cs {
			cs[i].slices = slices.Clone(cs[i].slices)
		}
		x.file = &fileData{chunks: cs}
	}
	x.gen = epoch
}

// ownPending gives the engine its own pending slice batches before it
// changes them, if a live freeze holds them.
func (e *Engine) ownPending() {
	if e.pendingGen >= e.cow {
		return
	}
	ps := make([]*allocBatch, len(e.pending))
	for i, b := range e.pending {
		c := *b
		c.used = slices.Clone(b.used)
		ps[i] = &c
	}
	e.pending = ps
	e.pendingGen = e.epoch
}

// ownGarbage gives the engine its own garbage list before it changes it,
// if a live freeze holds it.
func (e *Engine) ownGarbage() {
	if e.garbageGen >= e.cow {
		return
	}
	e.garbage = maps.Clone(e.garbage)
	e.garbageGen = e.epoch
}
