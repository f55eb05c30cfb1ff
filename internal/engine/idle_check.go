package engine

import (
	"fmt"
	"slices"
)

// checkGhosts verifies the slots of nodes kept in packed directories: each
// ghost names a deep-packed directory that holds its node under the same
// inode number, and the released chunks are counted and hold only ghosts
// and free slots.
func (e *Engine) checkGhosts() error {
	s := &e.st
	released := 0
	for c, chunk := range s.nodes.chunks {
		if chunk == nil {
			released++
			if c >= s.nodes.ghosts.len() || s.nodes.ghosts.at(uint32(c)) == nil {
				return fmt.Errorf("node chunk %d released without its ghosts", c)
			}
		} else if c < s.nodes.ghosts.len() && s.nodes.ghosts.at(uint32(c)) != nil {
			return fmt.Errorf("node chunk %d both in memory and released", c)
		}
	}
	if released != s.idle.released {
		return fmt.Errorf("%d node chunks released, counted %d", released, s.idle.released)
	}
	for slot := uint32(1); slot < s.nodes.next; slot++ {
		if !s.ghostAt(slot) {
			continue
		}
		ino, xi := s.ghostOf(slot)
		if ino == 0 {
			if xi != 0 {
				return fmt.Errorf("free slot %d names directory record %d", slot, xi)
			}
			continue
		}
		if xi == 0 || xi >= s.extras.next {
			return fmt.Errorf("node %d in slot %d: kept in directory record %d, out of range", ino, slot, xi)
		}
		d := s.extras.at(xi).dir
		if d == nil || d.packed == nil || d.packed[0] != packDeep {
			return fmt.Errorf("node %d in slot %d: kept in directory record %d, which is not packed with its nodes", ino, slot, xi)
		}
		dd := s.decoded(d.packed)
		i, found := slices.BinarySearch(dd.slots, slot)
		if !found || dd.nodes[i].Ino != ino {
			return fmt.Errorf("node %d in slot %d: its packed directory does not hold it", ino, slot)
		}
	}
	return nil
}

// checkDeep verifies a deep-packed directory n: its packed nodes are plain
// (no directory, one link, no extra record), each in a slot that holds a
// ghost of the same inode number naming n's extra record, and the packed
// directories are counted.
func (e *Engine) checkDeep(n *node) error {
	s := &e.st
	d := s.extraOf(n).dir
	if d.packed == nil || d.packed[0] != packDeep {
		return nil
	}
	dd := s.decoded(d.packed)
	for i, slot := range dd.slots {
		c := &dd.nodes[i]
		if slot == 0 || slot >= s.nodes.next || (i > 0 && dd.slots[i-1] == slot) {
			return fmt.Errorf("dir %d packs slot %d wrongly", n.Ino, slot)
		}
		if c.Mode == 0 || c.Mode&S_IFMT == S_IFDIR || c.Nlink != 1 || (c.aux != 0 && c.aux&singleBit == 0) {
			return fmt.Errorf("dir %d packs node %d, which is no plain node (mode %o, %d links)", n.Ino, c.Ino, c.Mode, c.Nlink)
		}
		if !s.ghostAt(slot) {
			return fmt.Errorf("dir %d packs node %d, but its slot %d holds a node", n.Ino, c.Ino, slot)
		}
		if ino, xi := s.ghostOf(slot); ino != c.Ino || xi != n.aux {
			return fmt.Errorf("dir %d packs node %d, but its slot %d holds ghost %d of record %d", n.Ino, c.Ino, slot, ino, xi)
		}
		if e.opens[c.Ino] != 0 {
			return fmt.Errorf("dir %d packs node %d, which is open", n.Ino, c.Ino)
		}
	}
	return nil
}

// checkPackedCounts verifies the counts of packed directories.
func (e *Engine) checkPackedCounts() error {
	packed, deep := 0, 0
	for i := uint32(1); i < e.st.extras.next; i++ {
		if d := e.st.extras.at(i).dir; d != nil && d.packed != nil {
			packed++
			if d.packed[0] == packDeep {
				deep++
			}
		}
	}
	if packed != e.st.idle.packedDirs || deep != e.st.idle.deepDirs {
		return fmt.Errorf("%d directories packed, %d with their nodes; counted %d and %d",
			packed, deep, e.st.idle.packedDirs, e.st.idle.deepDirs)
	}
	return nil
}
