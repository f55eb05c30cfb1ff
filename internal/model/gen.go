package model

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"strings"
)

// Name pools for the generator: Names keeps directories small, WideNames
// lets them grow past the engine's small-directory size, so that a
// directory's entry index is built, grown, shrunk and dropped.
var (
	Names     = []string{"a", "b", "c", "d", "e"}
	WideNames = func() []string {
		names := make([]string, 40)
		for i := range names {
			names[i] = fmt.Sprintf("n%02d", i)
		}
		return names
	}()
)

var (
	long255     = strings.Repeat("n", 255)
	long256     = strings.Repeat("o", 256)
	dirModes    = []uint32{0o755, 0o777, 0o700, 0o711, 0o555, 0o311, 0o1777, 0o2775, 0o3777, 0o750, 0o770, 0o4755, 0o2755, 0, 0o1733}
	fileModes   = []uint32{0o644, 0o666, 0o600, 0o755, 0o4755, 0o2755, 0o2745, 0o6777, 0o444, 0, 0o1644, 0o2666, 0o4700}
	genIDs      = []uint32{0, 1000, 1001, 2000, 3000}
	genSizes    = []uint64{0, 1, 100, 4096, 1 << 20}
	xattrNames  = []string{"user.a", "user.b", "user.a", "trusted.t", "security.s", "system.x", "user.", "trusted.", "foo", "", "user." + strings.Repeat("x", 251), "user." + strings.Repeat("y", 250)}
	genCreds    = []Cred{CredRoot, CredRoot, CredRoot, CredU1, CredU1, CredU1, CredU2, CredU2}
	badNames    = []string{".", "..", "", "x/y", long255, long256, "nul\x00"}
	xattrValues = [][]byte{nil, []byte("v"), []byte("value2"), bytes.Repeat([]byte("z"), 300)}
)

// Generator produces a random op stream from a seed. Some choices look at
// the oracle's current tree (an existing path, a live inode), so the stream
// depends on the seed and on the oracle being driven by the same ops; the
// runner does both. It belongs to the runner's goroutine.
type Generator struct {
	rng    *rand.Rand
	o      *Oracle
	names  []string
	allow  func(Op) bool
	first  bool
	quotas bool
	acls   bool
	trash  bool
	snaps  bool
}

// GenConfig shapes a generator's stream.
type GenConfig struct {
	// Names is the pool of ordinary names (Names if nil).
	Names []string
	// Allow, if set, restricts the op mix: an op it refuses is drawn
	// again. A Target that cannot express some ops (a mount has no
	// inode-level calls) says so here rather than weakening the oracle.
	Allow func(Op) bool
	// Quotas adds directory quota ops to the mix (a stream without them
	// draws the same numbers as before they existed).
	Quotas bool
	// ACLs makes some xattr ops set, get and remove POSIX ACLs (acl.go),
	// with the same promise.
	ACLs bool
	// Trash adds the trash ops to the mix and keeps the other ops out of
	// the trash's own directories (the same promise again).
	Trash bool
	// Snapshots adds clones, snapshots and ops on paths through
	// .snapshot to the mix (the same promise).
	Snapshots bool
}

// NewGenerator returns the generator for seed, reading the tree of o.
func NewGenerator(seed int64, o *Oracle, cfg GenConfig) *Generator {
	g := &Generator{rng: rand.New(rand.NewSource(seed)), o: o, names: cfg.Names, allow: cfg.Allow, first: true, quotas: cfg.Quotas, acls: cfg.ACLs, trash: cfg.Trash, snaps: cfg.Snapshots}
	if g.names == nil {
		g.names = Names
	}
	return g
}

// SetupOp is the stream's first op: it makes the root writable to everyone,
// so that the non-root callers build trees of their own.
var SetupOp = Op{Kind: KSetAttr, Path: "/", Follow: true, Set: SetAttr{Valid: SetMode, Mode: 0o777}}

// Next returns the next op of the stream.
func (g *Generator) Next() Op {
	if g.first {
		g.first = false
		return SetupOp
	}
	for i := 0; ; i++ {
		op := g.random()
		if g.trash && g.o.touchesTrash(op) && i < 1000 {
			continue
		}
		if g.allow == nil || g.allow(op) || i == 1000 {
			return op
		}
	}
}

func (g *Generator) pick(n int) int { return g.rng.Intn(n) }

func (g *Generator) chance(pct int) bool { return g.rng.Intn(100) < pct }

func (g *Generator) cred() Cred { return genCreds[g.pick(len(genCreds))] }

// name returns a name from the pool, or now and then an odd one.
func (g *Generator) name() string {
	if g.chance(6) {
		return badNames[g.pick(len(badNames))]
	}
	return g.names[g.pick(len(g.names))]
}

// comp is a path component: mostly pool names, sometimes "." / ".." or a
// long one.
func (g *Generator) comp() string {
	switch {
	case g.chance(3):
		return "."
	case g.chance(4):
		return ".."
	case g.chance(1):
		return long255
	case g.chance(1):
		return long256
	}
	return g.names[g.pick(len(g.names))]
}

// path returns an absolute path of one to three components, sometimes with
// a trailing or doubled slash, rarely the root or an over-long path.
func (g *Generator) path() string {
	switch {
	case g.chance(1):
		return "/"
	case g.chance(1):
		return []string{"", "a", "a/b", "/a\x00b", "./a"}[g.pick(5)]
	}
	if g.chance(1) {
		return strings.Repeat("/", PathMax-1+g.pick(3))
	}
	k := 1 + g.pick(3)
	if g.chance(60) {
		k = 1 + g.pick(2)
	}
	var b strings.Builder
	for i := 0; i < k; i++ {
		b.WriteByte('/')
		if g.chance(2) {
			b.WriteByte('/')
		}
		b.WriteString(g.comp())
	}
	if g.chance(5) {
		b.WriteByte('/')
	}
	return b.String()
}

// existing returns, half of the time, the path of a node that exists in
// the oracle and has one of the given types (any type if none), and a
// random path otherwise.
func (g *Generator) existing(types ...uint32) string {
	if g.chance(50) {
		return g.path()
	}
	paths := g.o.paths(types...)
	if len(paths) == 0 {
		return g.path()
	}
	return paths[g.pick(len(paths))]
}

// target returns a symlink target: relative or absolute, sometimes
// pointing at itself or up the tree, rarely invalid.
func (g *Generator) target() string {
	switch {
	case g.chance(2):
		return []string{"", "a\x00"}[g.pick(2)]
	case g.chance(1):
		return strings.Repeat("t", PathMax-1+g.pick(3))
	case g.chance(40):
		return g.path()
	}
	k := 1 + g.pick(2)
	parts := make([]string, k)
	for i := range parts {
		parts[i] = g.comp()
	}
	s := strings.Join(parts, "/")
	if g.chance(10) {
		s += "/"
	}
	return s
}

func (g *Generator) mode(modes []uint32) uint32 {
	if g.chance(10) {
		return uint32(g.rng.Intn(0o10000))
	}
	return modes[g.pick(len(modes))]
}

func (g *Generator) random() Op {
	if g.quotas && g.chance(8) {
		return g.quota()
	}
	if g.trash && g.chance(6) {
		return g.trashOp()
	}
	if g.snaps && g.chance(7) {
		return g.snapOp()
	}
	c := g.cred()
	switch w := g.pick(100); {
	case w < 12:
		return Op{Kind: KMkdir, Cred: c, Path: g.path(), Mode: g.mode(dirModes)}
	case w < 22:
		return g.mknod(c)
	case w < 28:
		target := g.target()
		return Op{Kind: KSymlink, Cred: c, Path: g.path(), Target: target}
	case w < 33:
		old := g.existing(S_IFREG, S_IFIFO, S_IFSOCK, S_IFLNK, S_IFCHR)
		return Op{Kind: KLink, Cred: c, Path: old, Path2: g.path()}
	case w < 40:
		return Op{Kind: KUnlink, Cred: c, Path: g.existing()}
	case w < 45:
		return Op{Kind: KRmdir, Cred: c, Path: g.existing(S_IFDIR)}
	case w < 58:
		flags := uint32(0)
		switch r := g.pick(20); {
		case r < 4:
			flags = RenameNoReplace
		case r < 8:
			flags = RenameExchange
		case r == 8:
			flags = uint32(1 + g.pick(7))
		}
		old := g.existing()
		return Op{Kind: KRename, Cred: c, Path: old, Path2: g.path(), Flags: flags}
	case w < 70:
		path := g.existing()
		follow := !g.chance(10)
		return Op{Kind: KSetAttr, Cred: c, Path: path, Follow: follow, Set: g.setattr()}
	case w < 80:
		return g.xattr(c)
	case w < 84:
		path, name := g.path(), g.name()
		return Op{Kind: KLookup, Cred: c, Path: path, Name: name}
	case w < 91:
		path := g.path()
		return Op{Kind: KResolve, Cred: c, Path: path, Follow: g.chance(50)}
	case w < 95:
		op := Op{Kind: KReaddir, Cred: c, Path: g.path()}
		if g.chance(50) {
			op.Cursor = g.name()
		}
		op.Limit = g.pick(5)
		op.Attrs = g.chance(50)
		return op
	case w < 96:
		return Op{Kind: KSummary, Cred: c, Path: g.path()}
	case w < 97:
		return Op{Kind: KStatfs}
	case w < 98:
		return Op{Kind: KReadlink, Cred: c, Path: g.existing(S_IFLNK)}
	default:
		return g.inode(c)
	}
}

func (g *Generator) mknod(c Cred) Op {
	path := g.path()
	perm := g.mode(fileModes)
	var typ uint32
	switch r := g.pick(100); {
	case r < 55:
		typ = S_IFREG
	case r < 65:
		typ = 0
	case r < 77:
		typ = S_IFIFO
	case r < 86:
		typ = S_IFSOCK
	case r < 91:
		typ = S_IFCHR
	case r < 94:
		typ = S_IFBLK
	case r < 97:
		typ = S_IFDIR
	case r < 99:
		typ = S_IFLNK
	default:
		typ = 0o030000
	}
	rdev := uint32(g.pick(3)) << 8
	return Op{Kind: KMknod, Cred: c, Path: path, Mode: typ | perm, Rdev: rdev}
}

func (g *Generator) setattr() SetAttr {
	id := func() uint32 { return genIDs[g.pick(len(genIDs))] }
	ts := func() int64 { return int64(g.pick(5)) * 7777 }
	switch g.pick(9) {
	case 0, 1:
		return SetAttr{Valid: SetMode, Mode: g.mode(append(dirModes, fileModes...))}
	case 2:
		return SetAttr{Valid: SetUID, UID: id()}
	case 3:
		return SetAttr{Valid: SetGID, GID: id()}
	case 4:
		return SetAttr{Valid: SetUID | SetGID, UID: id(), GID: id()}
	case 5, 6:
		return SetAttr{Valid: SetSize, Size: genSizes[g.pick(len(genSizes))]}
	case 7:
		variants := []func() SetAttr{
			func() SetAttr { return SetAttr{Valid: SetAtime, Atime: ts()} },
			func() SetAttr { return SetAttr{Valid: SetMtime, Mtime: ts()} },
			func() SetAttr { return SetAttr{Valid: SetAtime | SetMtime, Atime: ts(), Mtime: ts()} },
			func() SetAttr { return SetAttr{Valid: SetAtimeNow} },
			func() SetAttr { return SetAttr{Valid: SetMtimeNow} },
			func() SetAttr { return SetAttr{Valid: SetAtimeNow | SetMtimeNow} },
			func() SetAttr { return SetAttr{Valid: SetAtimeNow | SetMtime, Mtime: ts()} },
		}
		return variants[g.pick(len(variants))]()
	default:
		return SetAttr{}
	}
}

// xattr is one xattr call on a path, following a final symlink unless it
// plays lgetxattr and friends.
func (g *Generator) xattr(c Cred) Op {
	path, follow := g.existing(), !g.chance(15)
	name := xattrNames[g.pick(len(xattrNames))]
	if g.chance(50) {
		name = xattrNames[g.pick(5)]
	}
	acl := g.acls && g.chance(40)
	if acl {
		name = ACLAccess
		if g.chance(40) {
			name = ACLDefault
		}
	}
	op := Op{Cred: c, Path: path, Follow: follow, Name: name}
	switch k := g.pick(10); {
	case k < 4:
		op.Kind = KSetXattr
		op.Value = xattrValues[g.pick(len(xattrValues))]
		if acl {
			op.Value = aclValues[g.pick(len(aclValues))]
		}
		if g.chance(2) {
			op.Value = make([]byte, XattrValue+1)
		}
		switch r := g.pick(10); {
		case r < 2:
			op.Flags = XattrCreate
		case r < 4:
			op.Flags = XattrReplace
		case r == 4:
			op.Flags = XattrCreate | XattrReplace
		case r == 5:
			op.Flags = 4
		}
	case k < 7:
		op.Kind = KGetXattr
	case k < 8:
		op.Kind, op.Name = KListXattr, ""
	default:
		op.Kind = KRemoveXattr
	}
	return op
}

// inoPick returns an inode number: mostly a live directory's, else any
// live node's, one never handed out, or one of another partition.
func (g *Generator) inoPick(dirs bool) Ino {
	var live, liveDirs []Ino
	for ino, n := range g.o.nodes {
		live = append(live, ino)
		if n.dir() {
			liveDirs = append(liveDirs, ino)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i] < live[j] })
	sort.Slice(liveDirs, func(i, j int) bool { return liveDirs[i] < liveDirs[j] })
	switch r := g.pick(100); {
	case dirs || r < 50:
		return liveDirs[g.pick(len(liveDirs))]
	case r < 80:
		return live[g.pick(len(live))]
	case r < 95:
		return MakeIno(g.o.part, uint64(g.pick(int(g.o.next)+3)))
	default:
		return MakeIno(g.o.part+1, 1)
	}
}

// inode is an inode-level call.
func (g *Generator) inode(c Cred) Op {
	ino, ino2 := g.inoPick(false), g.inoPick(false)
	name, name2 := g.name(), g.name()
	if g.chance(30) {
		name = badNames[g.pick(len(badNames))]
	}
	kinds := []Kind{KGetAttrIno, KLookupIno, KMkdirIno, KMknodIno, KSymlinkIno, KLinkIno, KUnlinkIno,
		KRmdirIno, KReadlinkIno, KSetAttrIno, KListXattrIno, KGetXattrIno, KSummaryIno, KReaddirIno}
	op := Op{Kind: kinds[g.pick(len(kinds))], Cred: c, Ino: ino}
	if g.chance(15) {
		// Rename between two live directories, with odd names.
		p1, p2 := g.inoPick(true), g.inoPick(true)
		flags := []uint32{0, RenameNoReplace, RenameExchange}[g.pick(3)]
		return Op{Kind: KRenameIno, Cred: c, Ino: p1, Name: name, Ino2: p2, Name2: name2, Flags: flags}
	}
	switch op.Kind {
	case KLookupIno, KUnlinkIno, KRmdirIno:
		op.Name = name
	case KMkdirIno:
		op.Name, op.Mode = name, 0o755
	case KMknodIno:
		op.Name, op.Mode = name, 0o644
	case KSymlinkIno:
		op.Name, op.Target = name, "a/b"
	case KLinkIno:
		op.Name, op.Ino2 = name, ino2
	case KGetXattrIno:
		op.Name = "user.a"
	}
	return op
}

// paths lists the paths of the live nodes of the given types (any if
// none), depth first in name order.
func (m *Oracle) paths(types ...uint32) []string {
	var paths []string
	var walk func(prefix string, n *node)
	walk = func(prefix string, n *node) {
		names := make([]string, 0, len(n.ents))
		for name := range n.ents {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			child := m.nodes[n.ents[name]]
			p := prefix + "/" + name
			ok := len(types) == 0
			for _, t := range types {
				ok = ok || child.typ == t
			}
			if ok {
				paths = append(paths, p)
			}
			if child.dir() {
				walk(p, child)
			}
		}
	}
	walk("", m.nodes[m.root])
	return paths
}
