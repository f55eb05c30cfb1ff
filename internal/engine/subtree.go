package engine

import (
	"cmp"
	"fmt"
	"io"
	"iter"
	"slices"
)

// A subtree's dump: the checkpoint encoding of the namespace under one
// directory, as a namespace of its own whose root is that directory. It is
// what `canopy dump PATH` writes and `canopy load` restores: paths in it
// are relative to PATH. Against the whole namespace's checkpoint:
//
//   - the top directory becomes the root (inode RootIno of the partition,
//     its own parent); every other node keeps its inode number;
//   - only the nodes reachable from the top are written, in slot order,
//     with no free slots: a node linked from outside the subtree too has
//     the count of its links inside as its link count, and files unlinked
//     but still open are left out;
//   - the inode and slice allocators are the engine's, so that a server
//     restored from it hands out neither an inode number nor a slice id
//     the dumped one used (a restore on the same object store must never
//     name another's objects);
//   - the quotas on directories of the subtree come along, the top's
//     as the root's;
//   - its federation tables are those a fresh partition starts with, and
//     it has no pending slice batches and no garbage (the objects those
//     name belong to the dumped namespace).
//
// Decoding needs nothing new: Load reads it as any checkpoint.

// FreezeSubtree is Freeze for a dump of the subtree under directory top
// (see above): the frozen view's WriteCheckpoint writes that subtree. It
// runs on the owner goroutine and fails with ENOENT or ENOTDIR.
func (e *Engine) FreezeSubtree(top Ino) (*Frozen, error) {
	if _, err := e.peekDir(top); err != nil {
		return nil, fmt.Errorf("freeze subtree %d: %w", top, err)
	}
	f := e.Freeze()
	f.top = e.st.slotOf(top)
	return f, nil
}

// writeSubtree writes the subtree under the directory in slot top as a
// checkpoint, and returns the number of nodes written.
func (e *Engine) writeSubtree(w io.Writer, top uint32) (int, error) {
	// Links to every slot from inside the subtree, the top counting one.
	links := make([]uint32, e.st.nodes.next)
	links[top] = 1
	count, dirs := 1, 0
	for stack := []uint32{top}; len(stack) > 0; {
		d := e.peekAt(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		dirs++
		e.st.extraOf(d).dir.each(func(_ []byte, slot uint32) bool {
			if links[slot] == 0 {
				count++
				if e.peekAt(slot).isDir() {
					stack = append(stack, slot)
				}
			}
			links[slot]++
			return true
		})
	}
	topIno := e.peekAt(top).Ino
	as := func(ino Ino) Ino {
		if ino == topIno {
			return e.root
		}
		return ino
	}
	used := uint64(0)
	files := 0
	inSubtree := func(yield func(uint32, *node) bool) {
		for slot := uint32(1); slot < uint32(len(links)); slot++ {
			if links[slot] != 0 && !yield(slot, e.peekAt(slot)) {
				return
			}
		}
	}
	for _, n := range inSubtree {
		if n.Mode&S_IFMT == S_IFREG {
			used += n.Size
		}
		if e.hasData(n) {
			files++
		}
	}

	enc := encoder{w: w, buf: make([]byte, 0, encodeChunk+encodeSlack)}
	enc.raw([]byte(checkpointMagic))
	enc.uint(uint64(e.part))
	enc.uint(e.next)
	enc.uint(used)
	enc.uint(uint64(count))
	enc.uint(0) // no free slots
	for slot, n := range inSubtree {
		nlink, parent := links[slot], Ino(0)
		if n.isDir() {
			nlink, parent = n.Nlink, as(e.st.extraOf(n).parent)
			if slot == top {
				parent = e.root
			}
		}
		enc.nodeAs(e, n, as(n.Ino), nlink, parent)
	}
	enc.uint(uint64(dirs))
	for _, n := range inSubtree {
		if !n.isDir() {
			continue
		}
		d := e.st.extraOf(n).dir
		enc.uint(uint64(as(n.Ino)))
		enc.uint(uint64(d.live))
		d.each(func(name []byte, slot uint32) bool {
			enc.uint(uint64(len(name)))
			enc.raw(name)
			enc.uint(uint64(e.peekAt(slot).Ino))
			return true
		})
	}
	fresh := tablesFor(e.part)
	enc.tables(&fresh)
	enc.uint(e.nextSlice)
	enc.uint(0) // no pending slice batches
	enc.uint(uint64(files))
	for _, n := range inSubtree {
		if e.hasData(n) {
			enc.fileChunks(e, n)
		}
	}
	enc.uint(0) // no garbage
	enc.quotas(e.subtreeQuotas(links, topIno))
	enc.inline(e.subtreeInline(inSubtree), nil)
	enc.flush()
	if enc.err != nil {
		return 0, fmt.Errorf("write subtree: %w", enc.err)
	}
	return count, nil
}

// subtreeInline returns the inline bytes of the slices of the files
// among nodes.
func (e *Engine) subtreeInline(nodes iter.Seq2[uint32, *node]) map[uint64][]byte {
	if len(e.inl.data) == 0 {
		return nil
	}
	out := map[uint64][]byte{}
	for _, n := range nodes {
		for _, ch := range e.chunks(n) {
			for _, s := range ch.slices {
				if d, ok := e.inl.data[s.ID]; ok {
					out[s.ID] = d
				}
			}
		}
	}
	return out
}

// subtreeQuotas returns the limits of the quotas on directories of the
// subtree whose slots links marks, the top's as the root's, by directory.
// It runs on a frozen view too, which has no inode index: the subtree's
// slots are walked instead.
func (e *Engine) subtreeQuotas(links []uint32, top Ino) []QuotaLimit {
	if len(e.quota.list) == 0 {
		return nil
	}
	limits := make(map[Ino]QuotaLimit, len(e.quota.list))
	for _, q := range e.quota.list {
		limits[q.Dir] = q
	}
	var list []QuotaLimit
	for slot := uint32(1); slot < uint32(len(links)); slot++ {
		if links[slot] == 0 {
			continue
		}
		q, ok := limits[e.peekAt(slot).Ino]
		if !ok {
			continue
		}
		if q.Dir == top {
			q.Dir = e.root
		}
		list = append(list, q)
	}
	slices.SortFunc(list, func(a, b QuotaLimit) int { return cmp.Compare(a.Dir, b.Dir) })
	return list
}
