package engine

import (
	"slices"
	"sort"
)

// SliceRef names a slice and the bytes stored for it. Freed is, in the
// garbage list, the time its last use went away.
type SliceRef struct {
	ID     uint64
	Size   uint32
	Freed  int64
	Inline bool // ListSlices: its bytes are held inline (inline.go), no object is stored yet
}

// Paging limits of ListGarbage and ListSlices.
const (
	DefaultListSlices = 1000
	MaxListSlices     = 10000
)

// garbageEntry is a slice no file uses any more, whose objects the
// collector has not yet removed.
type garbageEntry struct {
	size  uint32
	freed int64
}

// unref drops one use of slice s at time now: the id becomes garbage
// when this was its last use.
func (e *Engine) unref(s Slice, now int64) {
	if k := e.shared[s.ID]; k > 0 {
		if k == 1 {
			delete(e.shared, s.ID)
		} else {
			e.shared[s.ID] = k - 1
		}
		return
	}
	e.dropInline(s.ID)
	e.ownGarbage()
	e.garbage[s.ID] = garbageEntry{size: s.Size, freed: now}
	e.garbageSorted = nil
}

// sortedGarbage returns the garbage ids in order, rebuilding the cache if
// a change dropped it.
func (e *Engine) sortedGarbage() []uint64 {
	if e.garbageSorted == nil {
		e.garbageSorted = make([]uint64, 0, len(e.garbage))
		for id := range e.garbage {
			e.garbageSorted = append(e.garbageSorted, id)
		}
		slices.Sort(e.garbageSorted)
	}
	return e.garbageSorted
}

// ListGarbage returns, in id order, up to limit (0: DefaultListSlices; at
// most MaxListSlices) slices no file uses any more whose ids are greater
// than after and, if freedBefore is not 0, that were freed before it; eof
// is set when no more follow.
func (e *Engine) ListGarbage(after uint64, limit int, freedBefore int64) (refs []SliceRef, eof bool) {
	limit = listLimit(limit)
	ids := e.sortedGarbage()
	i := sort.Search(len(ids), func(i int) bool { return ids[i] > after })
	for ; i < len(ids); i++ {
		if len(refs) == limit {
			return refs, false
		}
		g := e.garbage[ids[i]]
		if freedBefore != 0 && g.freed >= freedBefore {
			continue
		}
		refs = append(refs, SliceRef{ID: ids[i], Size: g.size, Freed: g.freed})
	}
	return refs, true
}

// GarbageLen returns the number of slices in the garbage list.
func (e *Engine) GarbageLen() int { return len(e.garbage) }

// Purge forgets the garbage slices ids, whose objects are gone. Ids not in
// the garbage list are ignored: purging twice, or an id a file still uses,
// changes nothing.
func (e *Engine) Purge(ids []uint64) {
	for _, id := range ids {
		if _, ok := e.garbage[id]; ok {
			e.ownGarbage()
			delete(e.garbage, id)
			e.garbageSorted = nil
		}
	}
}

// ListSlices returns, in id order, up to limit (0: DefaultListSlices; at
// most MaxListSlices) slice ids greater than after that files use, each
// once, with its size; eof is set when no more follow. Ids of other
// partitions are listed too (files that came here by a rename across
// partitions), and so are the slices of a node this partition has sent to
// another one that has not arrived yet (a committed rename intent's
// image). It walks every file of the partition, so it is for fsck and
// the collector's sweep, not for a hot path.
func (e *Engine) ListSlices(after uint64, limit int) (refs []SliceRef, eof bool) {
	limit = listLimit(limit)
	// Keep the smallest ids seen, cutting back to limit+1 (one more tells
	// whether any follow) whenever 4*limit have piled up: memory stays
	// proportional to the page, not to the partition.
	bound := uint64(1<<64 - 1)
	for _, n := range e.st.all() {
		for _, ch := range e.chunks(n) {
			for _, s := range ch.slices {
				if s.ID > after && s.ID <= bound {
					refs = append(refs, SliceRef{ID: s.ID, Size: s.Size})
				}
			}
		}
		if len(refs) >= 4*limit {
			refs = sortedUnique(refs, limit+1)
			bound = refs[len(refs)-1].ID
		}
	}
	// A node on its way to another partition is in no file between the
	// decision at the source and its arrival: its image holds its slices.
	for _, in := range e.xr.list {
		if in.Image == nil {
			continue
		}
		for _, ch := range in.Image.AllChunks() {
			for _, s := range ch.Slices {
				if s.ID > after && s.ID <= bound {
					refs = append(refs, SliceRef{ID: s.ID, Size: s.Size})
				}
			}
		}
	}
	refs = sortedUnique(refs, limit+1)
	for i := range refs {
		_, inData := e.inl.data[refs[i].ID]
		_, inSent := e.inl.sent[refs[i].ID]
		refs[i].Inline = inData || inSent
	}
	if len(refs) > limit {
		return refs[:limit:limit], false
	}
	return refs, true
}

// sortedUnique sorts refs by id, drops repeated ids and keeps at most n.
func sortedUnique(refs []SliceRef, n int) []SliceRef {
	slices.SortFunc(refs, func(a, b SliceRef) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	refs = slices.CompactFunc(refs, func(a, b SliceRef) bool { return a.ID == b.ID })
	return refs[:min(len(refs), n)]
}

func listLimit(limit int) int {
	if limit <= 0 {
		return DefaultListSlices
	}
	return min(limit, MaxListSlices)
}
