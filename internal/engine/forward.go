package engine

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
)

// Identity across a rename between partitions. A node that moves to
// another partition gets a number there (inode numbers carry their
// partition), but whoever holds its old number (a mount's node id, a
// process's working directory, an open directory) still names it by that
// one. So each partition keeps forwards for numbers that are not its
// nodes' own:
//
//   - a tombstone for each node that left (XCommitSource, or the target's
//     node an exchange sent back): its old number and the partition it
//     went to;
//   - an alias for each node that arrived (XCommitTarget, or the node an
//     exchange brought): the number it had at the source (XNode.Attr.Ino)
//     and its number here.
//
// Forwarded follows them: an alias names the local node, a tombstone says
// which partition to ask next (with the number that partition knows), and
// the server answers such a call with that (pb.Moved), which the router
// follows. A node that moves on is found through the chain: its alias
// here names a number that then has a tombstone.
//
// Forwards are state (logged with the steps that make them, in the
// checkpoint as an optional section) and bounded: the oldest go first
// once there are MaxForwards, after which their numbers answer ESTALE as
// they did before forwards existed. They belong to the engine's owner
// goroutine.

// MaxForwards bounds the forwards an engine keeps (about 40 bytes each).
const MaxForwards = 1 << 20

// MaxForwardHops bounds the forwards followed within one partition
// (Forwarded, and the server's copy of them for lock calls).
const MaxForwardHops = 8

// forward is where a number that is not one of this partition's nodes
// went: to another partition (as is 0), or to local node as.
type forward struct {
	to  uint16
	as  Ino
	seq uint64 // when it was made: the order eviction follows
}

// forwardState holds the forwards and their order of making.
type forwardState struct {
	hook  func(ino Ino, to uint16, as Ino, dropped bool) // SetForwardHook's; not state, not frozen
	m     map[Ino]forward
	order []forwardRef // oldest first; an entry whose seq differs from m's was replaced since
	seq   uint64
	gen   uint32 // the epoch at which m and order were made the engine's own
}

type forwardRef struct {
	ino Ino
	seq uint64
}

// setForward records f for ino, dropping the oldest forwards beyond
// MaxForwards.
func (e *Engine) setForward(ino Ino, f forward) {
	fs := &e.fwd
	if fs.gen < e.cow || fs.m == nil {
		// A freeze shares them (freeze.go): copy before the first change.
		fs.m = maps.Clone(fs.m)
		if fs.m == nil {
			fs.m = make(map[Ino]forward)
		}
		fs.order = slices.Clone(fs.order)
		fs.gen = e.epoch
	}
	fs.seq++
	f.seq = fs.seq
	fs.m[ino] = f
	if fs.hook != nil {
		fs.hook(ino, f.to, f.as, false)
	}
	fs.order = append(fs.order, forwardRef{ino: ino, seq: f.seq})
	drop := 0
	for len(fs.m) > MaxForwards || len(fs.order)-drop > 2*MaxForwards {
		old := fs.order[drop]
		drop++
		if cur, ok := fs.m[old.ino]; ok && cur.seq == old.seq {
			delete(fs.m, old.ino)
			if fs.hook != nil {
				fs.hook(old.ino, 0, 0, true)
			}
		}
	}
	if drop > 0 {
		fs.order = slices.Delete(fs.order, 0, drop) // in place: the slice is this engine's own
	}
}

// tombstone records that node ino left for partition to.
func (e *Engine) tombstone(ino Ino, to uint16) { e.setForward(ino, forward{to: to}) }

// alias records that the node known elsewhere as old is local node ino.
// An image comes from another partition, so old is never one of this
// partition's numbers; one that is (a damaged image) is ignored, which
// keeps forwards off this partition's own numbers.
func (e *Engine) alias(old, ino Ino) {
	if old != 0 && old.Partition() != e.part {
		e.setForward(old, forward{as: ino})
	}
}

// SetForwardHook has fn called, on the owner goroutine, for each forward
// made (a tombstone to partition to, or an alias of local node as) and
// each dropped, from now on; EachForward gives those made before. It lets
// a reader on other goroutines keep a copy (the server's lock calls).
func (e *Engine) SetForwardHook(fn func(ino Ino, to uint16, as Ino, dropped bool)) { e.fwd.hook = fn }

// EachForward calls fn for every forward the engine keeps.
func (e *Engine) EachForward(fn func(ino Ino, to uint16, as Ino)) {
	for ino, f := range e.fwd.m {
		fn(ino, f.to, f.as)
	}
}

// Forwards returns how many forwards the engine keeps.
func (e *Engine) Forwards() int { return len(e.fwd.m) }

// Forwarded maps ino, a number a call names, to what this partition knows
// of it: the number of a local node (ino itself for one of its own, or
// the node an alias names), with moved false; or, for a node that left,
// the partition it went to and the number to ask it for, with moved true.
// A number it knows nothing of comes back unchanged, moved false.
func (e *Engine) Forwarded(ino Ino) (to uint16, as Ino, moved bool) {
	to, as, moved = FollowForwards(ino, func(n Ino) (uint16, Ino, bool) {
		f, ok := e.fwd.m[n] // never a node's own number (checkForwards)
		return f.to, f.as, ok
	})
	if !moved {
		to = e.part
	}
	return to, as, moved
}

// FollowForwards is the walk of Forwarded over any copy of a partition's
// forwards: get returns the forward kept for a number (as 0 for a
// tombstone), ok false for none. It follows aliases at most
// MaxForwardHops times; to is meaningful only when moved is true.
func FollowForwards(ino Ino, get func(Ino) (to uint16, as Ino, ok bool)) (to uint16, as Ino, moved bool) {
	as = ino
	for range MaxForwardHops {
		t, next, ok := get(as)
		switch {
		case !ok:
			return 0, as, false
		case next == 0:
			return t, as, true
		}
		as = next
	}
	return 0, as, false
}

// The forwards travel in the checkpoint as an optional section after the
// intents, written only while there are any: forwardsMagic, the count,
// then each forward oldest first: inode number, partition, local number
// (0 for a tombstone).
const forwardsMagic = "CNPYFW01"

func (enc *encoder) forwards(fs *forwardState) {
	if len(fs.m) == 0 {
		return
	}
	enc.raw([]byte(forwardsMagic))
	enc.uint(uint64(len(fs.m)))
	for _, r := range fs.order {
		if f, ok := fs.m[r.ino]; ok && f.seq == r.seq {
			enc.uint(uint64(r.ino))
			enc.uint(uint64(f.to))
			enc.uint(uint64(f.as))
		}
	}
}

// readForwards reads the forwards section, if the checkpoint has one;
// the section's magic has been read.
func (d *decoder) readForwards(e *Engine) {
	n := d.uint()
	if d.err == nil && (n == 0 || n > MaxForwards) {
		d.err = fmt.Errorf("%d forwards", n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		ino, to, as := Ino(d.uint()), d.uint(), Ino(d.uint())
		switch {
		case d.err != nil:
		case ino == 0 || to > 1<<PartitionBits-1:
			d.err = fmt.Errorf("forward of %d to partition %d", ino, to)
		case as == 0:
			e.tombstone(ino, uint16(to))
		default:
			e.setForward(ino, forward{as: as})
		}
	}
	if d.err == nil && len(e.fwd.m) != int(n) {
		d.err = fmt.Errorf("forwards: %d given, %d distinct", n, len(e.fwd.m))
	}
}

// readSections reads the optional sections after the inline bytes: the
// intents, then the forwards, each present or not.
func (d *decoder) readSections(e *Engine) {
	if d.err != nil {
		return
	}
	for _, sec := range []struct {
		magic string
		read  func(*Engine)
	}{{xintentsMagic, d.readIntents}, {xintentsMagic01, d.readIntents01}, {forwardsMagic, d.readForwards}} {
		b, err := d.r.Peek(len(sec.magic))
		if errors.Is(err, io.EOF) && len(b) == 0 {
			return
		}
		if string(b) != sec.magic {
			continue
		}
		d.bytes(len(sec.magic))
		if sec.read(e); d.err != nil {
			return
		}
	}
	if _, err := d.r.Peek(1); !errors.Is(err, io.EOF) && d.err == nil {
		d.err = errors.New("unknown section after the namespace")
	}
}

// checkForwards checks that no forward names one of this partition's
// nodes as its key, and that aliases name numbers of this partition.
func (e *Engine) checkForwards() error {
	for ino, f := range e.fwd.m {
		if e.st.slotOf(ino) != 0 {
			return fmt.Errorf("forward of %d, a node here", ino)
		}
		if f.as != 0 && f.as.Partition() != e.part {
			return fmt.Errorf("alias of %d to %d, not a number of partition %d", ino, f.as, e.part)
		}
	}
	return nil
}
