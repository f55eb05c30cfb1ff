package engine

import "fmt"

// Check verifies the namespace's invariants and returns the first
// violation it finds: every entry points at a node; every directory other
// than the root has exactly one entry, whose directory is its parent; every
// directory's link count is 2 plus its subdirectories; every other node's
// link count is the number of entries naming it; every node is reachable
// from the root (no orphans, no cycles); no node number is at or beyond the
// allocator's next; and the data path's invariants (see checkData). It
// walks the whole tree: for tests and fsck.
func (e *Engine) Check() error {
	root, ok := e.nodes[e.root]
	if !ok || !root.isDir() || root.parent != e.root {
		return fmt.Errorf("root %d missing or malformed", e.root)
	}
	refs := make(map[Ino]uint32, len(e.nodes))
	seen := make(map[Ino]bool, len(e.nodes))
	seen[e.root] = true
	queue := []*node{root}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		subdirs := uint32(0)
		for name, ino := range d.children {
			if checkSyntax(name) != nil || checkLen(name) != nil || isDot(name) {
				return fmt.Errorf("dir %d: bad entry name %q", d.attr.Ino, name)
			}
			child, ok := e.nodes[ino]
			if !ok {
				return fmt.Errorf("dir %d: entry %q points at missing node %d", d.attr.Ino, name, ino)
			}
			refs[ino]++
			if !child.isDir() {
				continue
			}
			subdirs++
			if seen[ino] {
				return fmt.Errorf("dir %d reached twice (entry %q in %d): cycle or extra link", ino, name, d.attr.Ino)
			}
			seen[ino] = true
			if child.parent != d.attr.Ino {
				return fmt.Errorf("dir %d: parent %d, but entry %q is in %d", ino, child.parent, name, d.attr.Ino)
			}
			queue = append(queue, child)
		}
		if want := 2 + subdirs; d.attr.Nlink != want {
			return fmt.Errorf("dir %d: nlink %d, want %d", d.attr.Ino, d.attr.Nlink, want)
		}
	}
	var used uint64
	for ino, n := range e.nodes {
		if n.attr.Ino != ino {
			return fmt.Errorf("node %d stored under %d", n.attr.Ino, ino)
		}
		if ino.Partition() != e.part || uint64(ino)&(1<<localBits-1) >= e.next {
			return fmt.Errorf("node %d outside the allocated range (next %d)", ino, e.next)
		}
		if !n.isDir() {
			if !seen[ino] && refs[ino] > 0 {
				seen[ino] = true
			}
			if n.attr.Nlink != refs[ino] {
				return fmt.Errorf("node %d: nlink %d, but %d entries", ino, n.attr.Nlink, refs[ino])
			}
			if n.attr.Mode&S_IFMT == S_IFREG {
				used += n.attr.Size
			}
		}
		if !seen[ino] && !(n.attr.Nlink == 0 && n.attr.Mode&S_IFMT == S_IFREG) {
			return fmt.Errorf("node %d unreachable from the root", ino)
		}
	}
	if used != e.used {
		return fmt.Errorf("used bytes %d, but files hold %d", e.used, used)
	}
	return e.checkData()
}
