package model

import (
	"sort"
	"strconv"
	"strings"
)

// The generator's clones and snapshots: copies of what exists, snapshots
// of the directories there are, and ops on paths through .snapshot, most
// of them changes that the snapshots refuse. The tree is kept small: a
// copy of a large subtree, or any copy once the tree is large, gives way
// to a removal of a snapshot.

const (
	genCopyMax = 120  // nodes a generated copy may hold
	genTreeMax = 1200 // nodes past which no copy is generated
)

var snapNames = []string{"s1", "s2", "s3", "s1", "s2"}

// genSnap is one snapshot the oracle holds, for the generator.
type genSnap struct {
	dir  string // the directory's path
	name string
	top  *node
}

// snapshots lists the oracle's snapshots, by directory number and name.
func (m *Oracle) snapshots() []genSnap {
	a := m.area()
	if a == nil {
		return nil
	}
	var out []genSnap
	for _, dname := range m.sortedNames(a) {
		dir, err := strconv.ParseUint(dname, 10, 64)
		d := m.nodes[Ino(dir)]
		ad := m.nodes[a.ents[dname]]
		if err != nil || d == nil || !d.dir() || !ad.dir() {
			continue
		}
		for _, name := range m.sortedNames(ad) {
			out = append(out, genSnap{dir: m.dirPath(d), name: name, top: m.nodes[ad.ents[name]]})
		}
	}
	return out
}

// snapName is a snapshot name: mostly from a small pool, now and then an
// odd one.
func (g *Generator) snapName() string {
	if g.chance(8) {
		return badNames[g.pick(len(badNames))]
	}
	return snapNames[g.pick(len(snapNames))]
}

// copyFits reports whether a copy of the node at path (resolved as root)
// keeps the tree small.
func (g *Generator) copyFits(path string) bool {
	if g.o.Len() > genTreeMax {
		return false
	}
	a, err := g.o.Resolve(CredRoot, path, true)
	if err != nil {
		return true
	}
	n, _ := g.o.distinctUsage(g.o.nodes[a.Ino])
	return n <= genCopyMax
}

// snapPath returns a path through .snapshot: a snapshot's root, or a path
// below it; "" if there is no snapshot.
func (g *Generator) snapPath(snaps []genSnap) string {
	if len(snaps) == 0 {
		return ""
	}
	s := snaps[g.pick(len(snaps))]
	p := s.dir + "/" + SnapshotDir + "/" + s.name
	if s.dir == "/" {
		p = "/" + SnapshotDir + "/" + s.name
	}
	if g.chance(70) {
		var rel []string
		var walk func(prefix string, n *node)
		walk = func(prefix string, n *node) {
			for _, name := range g.o.sortedNames(n) {
				child := g.o.nodes[n.ents[name]]
				rel = append(rel, prefix+"/"+name)
				if child.dir() && len(rel) < 200 {
					walk(prefix+"/"+name, child)
				}
			}
		}
		if s.top.dir() {
			walk("", s.top)
		}
		if len(rel) > 0 {
			p += rel[g.pick(len(rel))]
		}
	}
	return p
}

// snapOp is a generated clone, snapshot or op through .snapshot.
func (g *Generator) snapOp() Op {
	c := g.cred()
	snaps := g.o.snapshots()
	r := g.pick(100)
	if r < 45 && g.o.Len() > genTreeMax && len(snaps) > 0 {
		r = 60 // a removal instead
	}
	switch {
	case r < 20:
		if g.chance(40) {
			c = CredRoot
		}
		src := g.existing()
		if g.chance(40) {
			if paths := g.o.paths(); len(paths) > 0 {
				src = paths[g.pick(len(paths))]
			}
		}
		if g.chance(5) {
			src = "/"
		}
		if !g.copyFits(src) {
			src = g.existing(S_IFREG, S_IFLNK, S_IFIFO)
		}
		return Op{Kind: KClone, Cred: c, Path: src, Path2: g.newPath(), Follow: !g.chance(20)}
	case r < 24:
		src, dst := g.inoPick(false), g.inoPick(true)
		if n := g.o.nodes[src]; n != nil && g.o.Len() > genTreeMax {
			src = MakeIno(g.o.part, g.o.next+1) // not yet made: ENOENT
		} else if n != nil {
			if k, _ := g.o.distinctUsage(n); k > genCopyMax {
				src = MakeIno(g.o.part, g.o.next+1)
			}
		}
		return Op{Kind: KCloneIno, Cred: c, Ino: src, Ino2: dst, Name: g.name()}
	case r < 45:
		if g.chance(50) {
			c = CredRoot
		}
		dir := g.existingDir()
		if g.chance(8) {
			dir = "/"
		}
		if !g.copyFits(dir) {
			dir = g.snapPath(snaps) // a snapshot of a snapshot: EROFS
			if dir == "" {
				dir = g.path()
			}
		}
		return Op{Kind: KSnapCreate, Cred: c, Path: dir, Name: g.snapName()}
	case r < 62:
		if g.chance(50) {
			c = CredRoot
		}
		op := Op{Kind: KSnapRm, Cred: c, Path: g.existing(S_IFDIR), Name: g.snapName()}
		if len(snaps) > 0 && !g.chance(15) {
			s := snaps[g.pick(len(snaps))]
			op.Path, op.Name = s.dir, s.name
		}
		return op
	case r < 66:
		op := Op{Kind: KSnapLs, Cred: c, Path: g.existing(S_IFDIR)}
		if len(snaps) > 0 && g.chance(70) {
			op.Path = snaps[g.pick(len(snaps))].dir
		}
		return op
	case r < 72:
		if g.chance(60) {
			c = CredRoot
		}
		op := Op{Kind: KSnapDiff, Cred: c, Path: g.existing(S_IFDIR), Name: g.snapName()}
		if len(snaps) > 0 && !g.chance(10) {
			s := snaps[g.pick(len(snaps))]
			op.Path, op.Name = s.dir, s.name
			var names []string
			for _, t := range snaps {
				if t.dir == s.dir {
					names = append(names, t.name)
				}
			}
			sort.Strings(names)
			if g.chance(50) {
				op.Name2 = names[g.pick(len(names))]
			}
		}
		return op
	}
	return g.throughSnapshot(c, snaps)
}

// throughSnapshot is an op on a path through .snapshot: a read, or a
// change that must fail with EROFS.
func (g *Generator) throughSnapshot(c Cred, snaps []genSnap) Op {
	p := g.snapPath(snaps)
	if p == "" {
		return Op{Kind: KResolve, Cred: c, Path: g.path() + "/" + SnapshotDir}
	}
	child := p + "/" + g.names[g.pick(len(g.names))]
	switch g.pick(16) {
	case 0, 1, 2:
		return Op{Kind: KResolve, Cred: c, Path: p, Follow: g.chance(50)}
	case 3:
		return Op{Kind: KReaddir, Cred: c, Path: p, Limit: g.pick(4), Attrs: g.chance(50)}
	case 4:
		return Op{Kind: KLookup, Cred: c, Path: p, Name: g.name()}
	case 5:
		return Op{Kind: KGetXattr, Cred: c, Path: p, Follow: true, Name: xattrNames[g.pick(5)]}
	case 6:
		return Op{Kind: KMkdir, Cred: c, Path: child, Mode: 0o755}
	case 7:
		return Op{Kind: KMknod, Cred: c, Path: child, Mode: S_IFREG | 0o644}
	case 8:
		return Op{Kind: KUnlink, Cred: c, Path: p}
	case 9:
		return Op{Kind: KRmdir, Cred: c, Path: p}
	case 10:
		return Op{Kind: KRename, Cred: c, Path: p, Path2: g.path()}
	case 11:
		return Op{Kind: KRename, Cred: c, Path: g.existing(), Path2: child}
	case 12:
		return Op{Kind: KSetAttr, Cred: c, Path: p, Follow: g.chance(80), Set: g.setattr()}
	case 13:
		return Op{Kind: KSetXattr, Cred: c, Path: p, Follow: true, Name: "user.a", Value: []byte("v")}
	case 14:
		return Op{Kind: KLink, Cred: c, Path: p, Path2: g.path()}
	}
	// A clone out of a snapshot, writable.
	if !g.copyFits(p) {
		return Op{Kind: KResolve, Cred: c, Path: p}
	}
	return Op{Kind: KClone, Cred: c, Path: p, Path2: g.newPath(), Follow: true}
}

// newPath is mostly a pool name in an existing directory, else any path.
func (g *Generator) newPath() string {
	if g.chance(30) {
		return g.path()
	}
	return strings.TrimSuffix(g.existingDir(), "/") + "/" + g.names[g.pick(len(g.names))]
}

// existingDir is mostly the path of an existing directory (the root
// among them), else any path.
func (g *Generator) existingDir() string {
	if g.chance(15) {
		return g.path()
	}
	dirs := append(g.o.paths(S_IFDIR), "/")
	return dirs[g.pick(len(dirs))]
}
