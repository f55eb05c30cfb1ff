package engine

import "fmt"

// checkStore verifies the storage layout itself: every live node is found
// in the index under its own slot, the index holds nothing else, every
// extra record is named by exactly one node and holds what the node's type
// allows, and every directory's entry index finds each of its entries.
func (e *Engine) checkStore() error { return e.checkStoreOf(false) }

// checkStoreOf is checkStore; built says that Load has just built the
// engine, and then the two indexes Load fills itself from the records it
// placed are not probed again for every node and entry (the inode index:
// by indexAll, or by addNew's probe, after refusing a repeated inode; each
// directory's: by dirents.loaded, after refusing a repeated name), which
// at 10 million files is about a second of cache misses. Their counts are
// still compared, and everything the checkpoint's bytes decide is checked
// as for any engine.
func (e *Engine) checkStoreOf(built bool) error {
	s := &e.st
	live := 0
	auxOwner := make(map[uint32]Ino)
	ownerRefs := make(map[uint32]uint64)
	if err := e.checkGhosts(); err != nil {
		return err
	}
	if err := e.checkPackedCounts(); err != nil {
		return err
	}
	for slot := uint32(1); slot < s.nodes.next; slot++ {
		n := s.peekSlot(slot)
		if n.Ino == 0 {
			if n.aux != 0 {
				return fmt.Errorf("free slot %d names extra %d", slot, n.aux)
			}
			continue
		}
		live++
		ownerRefs[n.own]++
		if !built {
			if got := s.slotOf(n.Ino); got != slot {
				return fmt.Errorf("node %d in slot %d, but the index says %d", n.Ino, slot, got)
			}
		}
		if n.aux != 0 {
			if prev, dup := auxOwner[n.aux]; dup {
				return fmt.Errorf("extra %d named by nodes %d and %d", n.aux, prev, n.Ino)
			}
			auxOwner[n.aux] = n.Ino
		}
		if err := e.checkExtra(n, built); err != nil {
			return err
		}
	}
	if live != s.nodes.live || live != s.index.count {
		return fmt.Errorf("%d live nodes, but the slab counts %d and the index %d", live, s.nodes.live, s.index.count)
	}
	if err := checkFree(&s.nodes, func(i uint32) bool { return s.inoAt(i) == 0 }); err != nil {
		return err
	}
	if err := s.owners.check(ownerRefs); err != nil {
		return err
	}
	if len(auxOwner) != s.extras.live+s.singles.live {
		return fmt.Errorf("%d extras and singles named, but %d and %d live", len(auxOwner), s.extras.live, s.singles.live)
	}
	return nil
}

// checkExtra verifies n's extra record against its type.
func (e *Engine) checkExtra(n *node, built bool) error {
	x := e.st.extraOf(n)
	typ := n.Mode & S_IFMT
	if one := e.st.singleOf(n); one != nil {
		if typ != S_IFREG || one.slice.ID == 0 {
			return fmt.Errorf("node %d: a single slice on a non-file, or of id 0", n.Ino)
		}
		return nil
	}
	switch {
	case typ == S_IFDIR && (x == nil || x.dir == nil):
		return fmt.Errorf("dir %d has no entries", n.Ino)
	case typ != S_IFDIR && x != nil && x.dir != nil:
		return fmt.Errorf("node %d is no directory but has entries", n.Ino)
	case typ == S_IFLNK && (x == nil || x.target == "" || uint64(len(x.target)) != n.Size):
		return fmt.Errorf("symlink %d: target missing or its length not the size", n.Ino)
	case typ != S_IFLNK && x != nil && x.target != "":
		return fmt.Errorf("node %d is no symlink but has a target", n.Ino)
	case x != nil && x.empty():
		return fmt.Errorf("node %d has an empty extra record", n.Ino)
	case x != nil && x.rdev != 0 && typ != S_IFCHR && typ != S_IFBLK:
		return fmt.Errorf("node %d is no device but has a device number", n.Ino)
	case x != nil && x.dir == nil && x.target == "" && x.xattrs == nil && x.rdev == 0 && x.file != nil &&
		len(x.file.chunks) == 1 && len(x.file.chunks[0].slices) == 1:
		return fmt.Errorf("node %d: one slice kept in an extra record, not a single", n.Ino)
	}
	if x != nil && x.dir != nil {
		if err := x.dir.checkOf(!built); err != nil {
			return fmt.Errorf("dir %d: %w", n.Ino, err)
		}
		return e.checkDeep(n)
	}
	return nil
}

// check verifies d's bookkeeping: live and dead counts, and that the index
// (if any) finds every live entry at its offset.
func (d *dirents) check() error { return d.checkOf(true) }

// checkOf is check; without probe, the index is not asked for each entry
// (only its count is compared).
func (d *dirents) checkOf(probe bool) error {
	if d.packed != nil {
		count := 0
		eachPacked(d.packed, func([]byte, uint32) bool { count++; return true })
		if count != d.live {
			return fmt.Errorf("packed directory holds %d entries, counts %d", count, d.live)
		}
		return nil
	}
	live, dead := 0, 0
	for off := 0; off < len(d.buf); off = d.next(off) {
		if d.slotAt(off) == 0 {
			dead += d.next(off) - off
			continue
		}
		live++
		if d.index16 != nil && !fits16(off+1) {
			return fmt.Errorf("entry at %d in a directory indexed by 2-byte cells", off)
		}
		if !probe {
			continue
		}
		if got := d.find(string(d.nameAt(off))); got != off {
			return fmt.Errorf("entry %q at %d, but found at %d", d.nameAt(off), off, got)
		}
	}
	if live != d.live || dead != d.dead {
		return fmt.Errorf("directory holds %d live and %d dead bytes, counts %d and %d", live, dead, d.live, d.dead)
	}
	if d.index != nil && d.index16 != nil {
		return fmt.Errorf("directory has indexes of both widths")
	}
	if d.indexed() {
		used := 0
		for i := range d.cells() {
			if d.cell(i) != 0 {
				used++
			}
		}
		if used != d.live {
			return fmt.Errorf("directory index holds %d entries, %d live", used, d.live)
		}
	}
	return nil
}

// checkFree verifies a slab's free list: exactly its unused records below
// next (unused says which those are), each once.
func checkFree[T any](s *slab[T], unused func(uint32) bool) error {
	if s.next > 0 && int(s.next)-1 != s.live+len(s.free) {
		return fmt.Errorf("slab of %d records: %d live and %d free", s.next-1, s.live, len(s.free))
	}
	seen := make(map[uint32]bool, len(s.free))
	for _, i := range s.free {
		if i == 0 || i >= s.next || seen[i] || !unused(i) {
			return fmt.Errorf("free list names record %d (of %d) wrongly", i, s.next)
		}
		seen[i] = true
	}
	return nil
}
