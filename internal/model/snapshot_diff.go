package model

import (
	"bytes"
	"syscall"
)

// SnapshotDiff is the model's comparison of snapshot from of directory dir
// with snapshot to, or with the directory as it is when to is "": the
// changes in path order, entries by name.
func (m *Oracle) SnapshotDiff(c Cred, dir Ino, from, to string) ([]SnapshotChange, bool, error) {
	d, err := m.dirNode(dir)
	if err != nil {
		return nil, false, err
	}
	if !ownerOrRoot(c, d) {
		return nil, false, syscall.EPERM
	}
	a, err := m.snapshotRoot(dir, from)
	if err != nil {
		return nil, false, err
	}
	b := d
	if to != "" {
		if b, err = m.snapshotRoot(dir, to); err != nil {
			return nil, false, err
		}
	}
	var out []SnapshotChange
	var walk func(path string, a, b *node)
	walk = func(path string, a, b *node) {
		if a.typ != b.typ {
			out = append(out, SnapshotChange{'-', path, a.typ}, SnapshotChange{'+', path, b.typ})
			return
		}
		if !sameNode(a, b) {
			out = append(out, SnapshotChange{'M', path, b.typ})
		}
		if !a.dir() {
			return
		}
		an, bn := m.sortedNames(a), m.diffNames(b)
		i, k := 0, 0
		for i < len(an) || k < len(bn) {
			switch {
			case k == len(bn) || i < len(an) && an[i] < bn[k]:
				out = append(out, SnapshotChange{'-', path + "/" + an[i], m.nodes[a.ents[an[i]]].typ})
				i++
			case i == len(an) || bn[k] < an[i]:
				out = append(out, SnapshotChange{'+', path + "/" + bn[k], m.nodes[b.ents[bn[k]]].typ})
				k++
			default:
				walk(path+"/"+an[i], m.nodes[a.ents[an[i]]], m.nodes[b.ents[bn[k]]])
				i++
				k++
			}
		}
	}
	walk(".", a, b)
	return out, false, nil
}

// diffNames is d's names in order, without the area if d is the root.
func (m *Oracle) diffNames(d *node) []string {
	names := m.sortedNames(d)
	if d.ino != m.root {
		return names
	}
	out := names[:0]
	for _, n := range names {
		if n != SnapshotArea {
			out = append(out, n)
		}
	}
	return out
}

// sameNode reports whether a and b, of one type, hold the same: what a
// diff compares.
func sameNode(a, b *node) bool {
	if a.perm != b.perm || a.uid != b.uid || a.gid != b.gid || a.mtime != b.mtime || !a.dir() && a.size != b.size ||
		a.target != b.target || a.rdev != b.rdev || len(a.xattrs) != len(b.xattrs) {
		return false
	}
	for k, v := range a.xattrs {
		if u, ok := b.xattrs[k]; !ok || !bytes.Equal(u, v) {
			return false
		}
	}
	return true
}
