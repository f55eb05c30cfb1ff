package engine

import "fmt"

// Check verifies the namespace's invariants and returns the first
// violation it finds: every entry points at a node; every directory other
// than the root has exactly one entry, whose directory is its parent; every
// directory's link count is 2 plus its subdirectories; every other node's
// link count is the number of entries naming it; every node is reachable
// from the root (no orphans, no cycles); no node number is at or beyond the
// allocator's next; the quotas', ACLs' and trash's (checkQuotas,
// checkACLs, checkTrash, checkSnapshots); and the data path's invariants (see
// checkData). It walks the whole tree: for tests and fsck.
func (e *Engine) Check() error {
	e.st.beginRO() // read what is packed where it is
	defer e.st.endRO()
	return e.check(e.checkStore)
}

// check is Check with store checking the store's own invariants (a
// function, so that Load can run it on another goroutine; a loaded
// engine has nothing packed, so Load needs no beginRO).
func (e *Engine) check(store func() error) error {
	rootSlot := e.st.slotOf(e.root)
	if rootSlot == 0 {
		return fmt.Errorf("root %d missing or malformed", e.root)
	}
	root := e.peekAt(rootSlot)
	if !root.isDir() || e.parentOf(root) != e.root {
		return fmt.Errorf("root %d missing or malformed", e.root)
	}
	// Per slot: entries naming it, and whether the walk reached it.
	refs := make([]uint32, e.st.nodes.next)
	seen := make([]bool, e.st.nodes.next)
	seen[rootSlot] = true
	queue := []*node{root}
	var err error
	for len(queue) > 0 && err == nil {
		d := queue[0]
		queue = queue[1:]
		subdirs := uint32(0)
		x := e.st.extraOf(d)
		if x == nil || x.dir == nil {
			return fmt.Errorf("dir %d has no entries", d.Ino)
		}
		x.dir.each(func(name []byte, slot uint32) bool {
			if !validEntryName(name) {
				err = fmt.Errorf("dir %d: bad entry name %q", d.Ino, name)
				return false
			}
			if slot >= e.st.nodes.next || e.peekAt(slot).Ino == 0 {
				err = fmt.Errorf("dir %d: entry %q points at a free slot %d", d.Ino, name, slot)
				return false
			}
			child := e.peekAt(slot)
			refs[slot]++
			if !child.isDir() {
				return true
			}
			subdirs++
			if seen[slot] {
				err = fmt.Errorf("dir %d reached twice (entry %q in %d): cycle or extra link", child.Ino, name, d.Ino)
				return false
			}
			seen[slot] = true
			if p := e.parentOf(child); p != d.Ino {
				err = fmt.Errorf("dir %d: parent %d, but entry %q is in %d", child.Ino, p, name, d.Ino)
				return false
			}
			queue = append(queue, child)
			return true
		})
		if err != nil {
			return err
		}
		if want := 2 + subdirs; d.Nlink != want {
			return fmt.Errorf("dir %d: nlink %d, want %d", d.Ino, d.Nlink, want)
		}
	}
	if err := store(); err != nil {
		return err
	}
	if err := e.checkIntents(); err != nil {
		return err
	}
	if err := e.checkForwards(); err != nil {
		return err
	}
	var used uint64
	for slot := uint32(1); slot < e.st.nodes.next; slot++ {
		n := e.peekAt(slot)
		ino := n.Ino
		if ino == 0 {
			continue
		}
		if ino.Partition() != e.part || uint64(ino)&(1<<localBits-1) >= e.next {
			return fmt.Errorf("node %d outside the allocated range (next %d)", ino, e.next)
		}
		if !n.isDir() {
			if !seen[slot] && refs[slot] > 0 {
				seen[slot] = true
			}
			if n.Nlink != refs[slot] {
				return fmt.Errorf("node %d: nlink %d, but %d entries", ino, n.Nlink, refs[slot])
			}
			if n.Mode&S_IFMT == S_IFREG {
				used += n.Size
			}
		}
		if !seen[slot] && !(n.Nlink == 0 && n.Mode&S_IFMT == S_IFREG) {
			return fmt.Errorf("node %d unreachable from the root", ino)
		}
	}
	if used != e.used {
		return fmt.Errorf("used bytes %d, but files hold %d", e.used, used)
	}
	if err := e.checkQuotas(); err != nil {
		return err
	}
	if err := e.checkACLs(); err != nil {
		return err
	}
	if err := e.checkTrash(); err != nil {
		return err
	}
	if err := e.checkSnapshots(); err != nil {
		return err
	}
	return e.checkData()
}
