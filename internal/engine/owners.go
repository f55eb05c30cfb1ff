package engine

import "fmt"

// owners interns the (uid, gid) pairs of the namespace's nodes: a node
// keeps the 4-byte id of its pair instead of 8 bytes of uid and gid, since
// a file system has few distinct pairs. Pairs are counted, and an id whose
// last node goes is reused. Id 0 is root's pair (0, 0) and is never
// released. The ids are internal: checkpoints write uids and gids.
//
// A pair also carries the nearest directory quota over a non-directory
// (its region, quota.go; 0 for directories and for nodes under no quota),
// so that a file below a quota costs nothing more than one outside: there
// are few distinct (uid, gid, region) triples too.
type owners struct {
	pairs []owner
	refs  []uint64
	ids   map[owner]uint32
	free  []uint32

	// The triple refIn found last, and its id, so that a run of nodes of
	// one owner (a load, a tree of one user's files) skips the map;
	// cleared when that id is released.
	last    owner
	lastID  uint32
	hasLast bool
}

type owner struct {
	uid, gid uint32
	region   Ino // the nearest directory quota over a non-directory, or 0
}

// ref returns the id of (uid, gid), adding the pair if it is new, and
// counts one more node holding it.
func (o *owners) ref(uid, gid uint32) uint32 { return o.refIn(uid, gid, 0) }

// refIn is ref for the triple (uid, gid, region).
func (o *owners) refIn(uid, gid uint32, region Ino) uint32 {
	if o.ids == nil {
		o.pairs, o.refs = []owner{{}}, []uint64{0}
		o.ids = map[owner]uint32{{}: 0}
	}
	p := owner{uid, gid, region}
	if o.hasLast && o.last == p {
		o.refs[o.lastID]++
		return o.lastID
	}
	id, ok := o.ids[p]
	if !ok {
		if k := len(o.free); k > 0 {
			id = o.free[k-1]
			o.free = o.free[:k-1]
			o.pairs[id] = p
		} else {
			id = uint32(len(o.pairs))
			o.pairs = append(o.pairs, p)
			o.refs = append(o.refs, 0)
		}
		o.ids[p] = id
	}
	o.refs[id]++
	o.last, o.lastID, o.hasLast = p, id, true
	return id
}

// unref counts one node fewer holding id.
func (o *owners) unref(id uint32) {
	if o.refs == nil {
		return // a zeroed node of an engine that never referenced a pair
	}
	o.refs[id]--
	if o.refs[id] == 0 && id != 0 {
		delete(o.ids, o.pairs[id])
		o.free = append(o.free, id)
		if o.hasLast && o.lastID == id {
			o.hasLast = false
		}
	}
}

func (o *owners) get(id uint32) owner {
	if o.pairs == nil {
		return owner{}
	}
	return o.pairs[id]
}

// uid and gid return n's owner and group.
func (e *Engine) uid(n *node) uint32 { return e.st.owners.get(n.own).uid }
func (e *Engine) gid(n *node) uint32 { return e.st.owners.get(n.own).gid }

// setOwner makes uid:gid n's owner and group; its region stays.
func (e *Engine) setOwner(n *node, uid, gid uint32) {
	id := e.st.owners.refIn(uid, gid, e.st.owners.get(n.own).region)
	e.st.owners.unref(n.own)
	n.own = id
}

// check verifies the counts against refs, the nodes counted per id.
func (o *owners) check(refs map[uint32]uint64) error {
	for id := range o.pairs {
		if got := refs[uint32(id)]; got != o.refs[id] {
			return fmt.Errorf("owner %d (%d:%d): %d nodes, counted %d", id, o.pairs[id].uid, o.pairs[id].gid, got, o.refs[id])
		}
		if o.refs[id] > 0 || id == 0 {
			if o.ids[o.pairs[id]] != uint32(id) {
				return fmt.Errorf("owner %d (%d:%d) not found under its pair", id, o.pairs[id].uid, o.pairs[id].gid)
			}
		}
	}
	for id := range refs {
		if int(id) >= len(o.pairs) {
			return fmt.Errorf("a node names owner %d of %d", id, len(o.pairs))
		}
	}
	return nil
}
