package engine

import (
	"bytes"
	"slices"
)

// SnapshotChange is one difference between two states of a directory's
// subtree, as HDFS's snapshotDiff reports them: Op is '+' for an entry
// only the later state has, '-' for one only the earlier has, and 'M'
// for one both have whose node differs (type bits, permissions, owner,
// size, mtime, symlink target, device number, xattrs, or for a regular
// file its data). Path is relative to the directory ("." for the
// directory itself); an entry whose type changed is '-' and '+'. What a
// directory that only one state has holds is not listed below it.
type SnapshotChange struct {
	Op   byte
	Path string
	Type uint32 // type bits of the node (the later state's for 'M')
}

// MaxSnapshotChanges is the most changes SnapshotDiff returns; more set
// its truncated result.
const MaxSnapshotChanges = 100000

// SnapshotDiff compares snapshot from of directory dir with snapshot to,
// or with the directory as it is now when to is "". Only the directory's
// owner or root may (EPERM), as for taking one. Changes come in path
// order, at most MaxSnapshotChanges (truncated then set).
func (e *Engine) SnapshotDiff(c Cred, dir Ino, from, to string) (changes []SnapshotChange, truncated bool, err error) {
	d, err := e.peekDir(dir)
	if err != nil {
		return nil, false, err
	}
	if err := e.mayManageSnapshots(c, d); err != nil {
		return nil, false, err
	}
	a, err := e.snapshotRoot(dir, from)
	if err != nil {
		return nil, false, err
	}
	b := d
	if to != "" {
		if b, err = e.snapshotRoot(dir, to); err != nil {
			return nil, false, err
		}
	}
	w := diffWalk{e: e, skip: 0}
	if dir == e.root {
		w.skip = e.snaps().area
	}
	w.node(".", a, b)
	return w.out, w.truncated, nil
}

// diffWalk compares two trees.
type diffWalk struct {
	e         *Engine
	skip      Ino // the snapshot area, in a diff of the root
	out       []SnapshotChange
	truncated bool
}

func (w *diffWalk) add(op byte, path string, n *node) {
	if len(w.out) >= MaxSnapshotChanges {
		w.truncated = true
		return
	}
	w.out = append(w.out, SnapshotChange{Op: op, Path: path, Type: n.Mode & S_IFMT})
}

// node compares a and b, the same path in both states.
func (w *diffWalk) node(path string, a, b *node) {
	if a.Mode&S_IFMT != b.Mode&S_IFMT {
		w.add('-', path, a)
		w.add('+', path, b)
		return
	}
	if !w.e.sameNode(a, b) {
		w.add('M', path, b)
	}
	if !a.isDir() || w.truncated {
		return
	}
	an, bn := w.names(a), w.names(b)
	i, k := 0, 0
	for (i < len(an) || k < len(bn)) && !w.truncated {
		switch {
		case k == len(bn) || i < len(an) && an[i] < bn[k]:
			_, n := w.e.peekChild(a, an[i])
			w.add('-', join(path, an[i]), n)
			i++
		case i == len(an) || bn[k] < an[i]:
			_, n := w.e.peekChild(b, bn[k])
			w.add('+', join(path, bn[k]), n)
			k++
		default:
			_, x := w.e.peekChild(a, an[i])
			_, y := w.e.peekChild(b, bn[k])
			w.node(join(path, an[i]), x, y)
			i++
			k++
		}
	}
}

// names returns directory d's entry names in order, without the area.
func (w *diffWalk) names(d *node) []string {
	names := w.e.sortedNames(d)
	if w.skip != 0 && d.Ino == w.e.root {
		names = slices.DeleteFunc(names, func(s string) bool { return s == SnapshotArea })
	}
	return names
}

func join(dir, name string) string { return dir + "/" + name }

// sameNode reports whether a and b, of one type, hold the same.
func (e *Engine) sameNode(a, b *node) bool {
	// The owners, not the owner ids: an id also names the node's quota
	// region, which a snapshot's copy does not share.
	if a.Mode != b.Mode || e.uid(a) != e.uid(b) || e.gid(a) != e.gid(b) || a.Mtime != b.Mtime || (!a.isDir() && a.Size != b.Size) {
		return false
	}
	xa, xb := e.st.extraOf(a), e.st.extraOf(b)
	var ta, tb string
	var ra, rb uint32
	var ma, mb map[string][]byte
	if xa != nil {
		ta, ra, ma = xa.target, xa.rdev, xa.xattrs
	}
	if xb != nil {
		tb, rb, mb = xb.target, xb.rdev, xb.xattrs
	}
	if ta != tb || ra != rb || len(ma) != len(mb) {
		return false
	}
	for k, v := range ma {
		if u, ok := mb[k]; !ok || !bytes.Equal(u, v) {
			return false
		}
	}
	ca, cb := e.chunks(a), e.chunks(b)
	return slices.EqualFunc(ca, cb, func(x, y chunk) bool {
		return x.idx == y.idx && slices.Equal(x.slices, y.slices)
	})
}
