package router

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// xmodelSeedEnv replays one seed of TestNamespaceModelAcrossPartitions
// (instead of three drawn from the clock); xmodelStepsEnv sets the steps
// of each seed.
const (
	xmodelSeedEnv  = "CANOPY_XMODEL_SEED"
	xmodelStepsEnv = "CANOPY_XMODEL_STEPS"
)

// TestNamespaceModelAcrossPartitions is the model-based test of the
// namespace across partitions: a seeded random sequence of creates,
// writes, mkdirs, symlinks, renames (plain, RENAME_NOREPLACE,
// RENAME_EXCHANGE; by path and by inode), links, unlinks and rmdirs over a
// small name space spread over the three partitions of newXFixture (/ is
// partition 0, /p1 partition 1, /p2 partition 2), applied through the
// router and to an in-test model of the tree, which predicts each outcome:
// Linux's semantics within a partition, and across partitions the rules of
// docs/rebalance.md, "Rename and link across partitions" (files, symlinks
// and directories with their subtrees move, also in an exchange; a
// hard-linked node does not, EXDEV; a mount point does not, EBUSY; link
// is EXDEV). Errnos are compared exactly except where two are both right:
// ENOTEMPTY or EEXIST for a directory that is not empty, the first error
// of Linux's order or of the protocol's (the source's partition checks
// before the target's) for a rename across partitions, EXDEV or Linux's
// error for a link across partitions, and a mount point taken as the root
// of its partition (EBUSY; EEXIST under RENAME_NOREPLACE).
//
// After every op the paths it named are looked up; every 50 steps and at
// the end the whole tree is listed through the router and compared with
// the model (names, types, link counts, contents, symlink targets, which
// names share an inode, each inode in the partition of its path). At the
// end no partition may hold a rename intent, and each passes its invariant
// check from what it left on disk. A mismatch fails with the seed, the step
// and the last 20 ops.
func TestNamespaceModelAcrossPartitions(t *testing.T) {
	steps, runs := 1500, 3
	if testing.Short() {
		steps, runs = 400, 1
	}
	if s := os.Getenv(xmodelStepsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number", xmodelStepsEnv, s)
		}
		steps = n
	}
	var seeds []uint64
	if s := os.Getenv(xmodelSeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", xmodelSeedEnv, s, err)
		}
		seeds = append(seeds, seed)
	} else {
		base := uint64(time.Now().UnixNano())
		for i := range runs {
			seeds = append(seeds, base+uint64(i)*0x9e3779b97f4a7c15)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runXModel(t, seed, steps)
		})
	}
}

// ---- the model ----

// xnode is a node of the model: a directory (kids), a regular file (data)
// or a symlink (target). A file or symlink named by several entries is
// one xnode; links counts those entries.
type xnode struct {
	kind   byte // 'd', 'f' or 'l'
	kids   map[string]*xnode
	data   []byte
	target string
	links  int
	mount  bool // the root of a partition: /, /p1, /p2
	id     int  // for messages
}

func (n *xnode) dir() bool { return n.kind == 'd' }

// xnames is the name space below each directory: short, so that collisions,
// replacements and directory moves are frequent.
var xnames = []string{"a", "b", "c", "d"}

type xmodel struct {
	root *xnode
	ids  int
}

func newXModel() *xmodel {
	m := &xmodel{}
	m.root = m.newNode('d')
	m.root.mount = true
	for _, mp := range []string{"p1", "p2"} {
		n := m.newNode('d')
		n.mount = true
		m.root.kids[mp] = n
	}
	return m
}

func (m *xmodel) newNode(kind byte) *xnode {
	m.ids++
	n := &xnode{kind: kind, id: m.ids, links: 1}
	if kind == 'd' {
		n.kids = map[string]*xnode{}
	}
	return n
}

// xcomps splits an absolute path into its components.
func xcomps(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// xpartOf is the partition serving path p, as the router's mount table
// says: /p1 and below 1, /p2 and below 2, the rest 0.
func xpartOf(p string) int {
	switch c := xcomps(p); {
	case len(c) > 0 && c[0] == "p1":
		return 1
	case len(c) > 0 && c[0] == "p2":
		return 2
	}
	return 0
}

func xjoin(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// walkDir follows the components cs from the root, as path_lookupat
// does for the directory that holds a last component: every component
// must be a directory; a symlink is followed, and every symlink of the
// model points into /nowhere, which never exists.
func (m *xmodel) walkDir(cs []string) (*xnode, error) {
	cur := m.root
	for _, c := range cs {
		if !cur.dir() {
			return nil, syscall.ENOTDIR
		}
		next := cur.kids[c]
		if next == nil {
			return nil, syscall.ENOENT
		}
		if next.kind == 'l' {
			return nil, syscall.ENOENT // dangling: /nowhere/...
		}
		cur = next
	}
	if !cur.dir() {
		return nil, syscall.ENOTDIR
	}
	return cur, nil
}

// parent resolves the directory holding p's last component.
func (m *xmodel) parent(p string) (*xnode, string, error) {
	cs := xcomps(p)
	d, err := m.walkDir(cs[:len(cs)-1])
	return d, cs[len(cs)-1], err
}

// lstat is what Lstat(p) finds.
func (m *xmodel) lstat(p string) (*xnode, error) {
	d, name, err := m.parent(p)
	if err != nil {
		return nil, err
	}
	if n := d.kids[name]; n != nil {
		return n, nil
	}
	return nil, syscall.ENOENT
}

// each calls fn for every entry below the root, directories before what
// they hold, names in order (deterministic: the generator draws from it).
func (m *xmodel) each(fn func(p string, n *xnode)) {
	var walk func(dir string, d *xnode)
	walk = func(dir string, d *xnode) {
		for _, name := range slices.Sorted(maps.Keys(d.kids)) {
			n := d.kids[name]
			p := xjoin(dir, name)
			fn(p, n)
			if n.dir() {
				walk(p, n)
			}
		}
	}
	walk("/", m.root)
}

// nodes counts the entries below the root.
func (m *xmodel) nodes() int {
	n := 0
	m.each(func(string, *xnode) { n++ })
	return n
}

// xhardLinked reports whether n, or a node below it, has other names: such
// a node does not move across partitions (EXDEV).
func xhardLinked(n *xnode) bool {
	if !n.dir() {
		return n.links > 1
	}
	for _, k := range n.kids {
		if xhardLinked(k) {
			return true
		}
	}
	return false
}

// xdirLinks is a directory's link count: 2 and one per subdirectory.
func xdirLinks(n *xnode) int {
	l := 2
	for _, k := range n.kids {
		if k.dir() && !k.mount {
			l++
		}
	}
	return l
}

// xbelow reports whether p is a or lies below it.
func xbelow(p, a string) bool { return p == a || strings.HasPrefix(p, a+"/") }

// ---- operations ----

type xop struct {
	kind   string // create write mkdir symlink rename link unlink rmdir
	a, b   string
	flags  uint32
	data   []byte
	target string
	byIno  bool // rename and link: by the parents' (and the source's) inode numbers, as a FUSE mount calls
}

func (o xop) String() string {
	s := o.string()
	if o.byIno {
		s += " (by inode)"
	}
	return s
}

func (o xop) string() string {
	switch o.kind {
	case "create", "write":
		return fmt.Sprintf("%s %s (%d bytes %x)", o.kind, o.a, len(o.data), sha256.Sum256(o.data))
	case "symlink":
		return fmt.Sprintf("symlink %s -> %s", o.a, o.target)
	case "rename":
		s := fmt.Sprintf("rename %s %s", o.a, o.b)
		switch o.flags {
		case client.RenameNoReplace:
			s += " NOREPLACE"
		case client.RenameExchange:
			s += " EXCHANGE"
		}
		return s
	case "link":
		return fmt.Sprintf("link %s %s", o.a, o.b)
	}
	return o.kind + " " + o.a
}

// outcome is the model's prediction of an op: nil errs is success, and
// apply then changes the model as the op does; otherwise the op must fail
// with one of errs, or, with mayPass, may also succeed, changing nothing.
type outcome struct {
	errs    []syscall.Errno
	apply   func()
	mayPass bool
}

func xrefuse(errs ...syscall.Errno) outcome {
	// A directory that is not empty may be refused with either.
	if slices.Contains(errs, syscall.ENOTEMPTY) && !slices.Contains(errs, syscall.EEXIST) {
		errs = append(errs, syscall.EEXIST)
	}
	return outcome{errs: errs}
}

func xerrno(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// predict returns the outcome of o on the model.
func (m *xmodel) predict(o xop) outcome {
	switch o.kind {
	case "create", "mkdir", "symlink":
		d, name, err := m.parent(o.a)
		if err != nil {
			return xrefuse(xerrno(err))
		}
		if d.kids[name] != nil {
			return xrefuse(syscall.EEXIST)
		}
		return outcome{apply: func() {
			kind := map[string]byte{"create": 'f', "mkdir": 'd', "symlink": 'l'}[o.kind]
			n := m.newNode(kind)
			n.data, n.target = o.data, o.target
			d.kids[name] = n
		}}
	case "write": // open(O_WRONLY|O_CREAT|O_TRUNC), write, close
		d, name, err := m.parent(o.a)
		if err != nil {
			return xrefuse(xerrno(err))
		}
		switch n := d.kids[name]; {
		case n == nil:
			return outcome{apply: func() {
				n := m.newNode('f')
				n.data = o.data
				d.kids[name] = n
			}}
		case n.kind == 'l':
			return xrefuse(syscall.ENOENT) // O_CREAT follows it to /nowhere/...
		case n.dir():
			return xrefuse(syscall.EISDIR)
		default:
			return outcome{apply: func() { n.data = o.data }}
		}
	case "unlink":
		d, name, err := m.parent(o.a)
		if err != nil {
			return xrefuse(xerrno(err))
		}
		n := d.kids[name]
		switch {
		case n == nil:
			return xrefuse(syscall.ENOENT)
		case n.dir():
			return xrefuse(syscall.EISDIR)
		}
		return outcome{apply: func() {
			delete(d.kids, name)
			n.links--
		}}
	case "rmdir":
		d, name, err := m.parent(o.a)
		if err != nil {
			return xrefuse(xerrno(err))
		}
		n := d.kids[name]
		switch {
		case n == nil:
			return xrefuse(syscall.ENOENT)
		case !n.dir():
			return xrefuse(syscall.ENOTDIR)
		case n.mount:
			return xrefuse(syscall.EBUSY)
		case len(n.kids) > 0:
			return xrefuse(syscall.ENOTEMPTY)
		}
		return outcome{apply: func() { delete(d.kids, name) }}
	case "link":
		return m.predictLink(o)
	case "rename":
		return m.predictRename(o)
	}
	panic("unknown op " + o.kind)
}

// predictLink is linkat without AT_SYMLINK_FOLLOW, in Linux's order (the
// old path, the new one, then EXDEV across mounts, then EPERM for a
// directory). Across partitions the router refuses first, so EXDEV is
// also right wherever Linux would fail later.
func (m *xmodel) predictLink(o xop) outcome {
	cross := xpartOf(o.a) != xpartOf(o.b)
	linux := func() (syscall.Errno, *xnode, *xnode, string) {
		s, err := m.lstat(o.a)
		if err != nil {
			return xerrno(err), nil, nil, ""
		}
		d, name, err := m.parent(o.b)
		if err != nil {
			return xerrno(err), nil, nil, ""
		}
		switch {
		case d.kids[name] != nil:
			return syscall.EEXIST, nil, nil, ""
		case cross:
			return syscall.EXDEV, nil, nil, ""
		case s.dir():
			return syscall.EPERM, nil, nil, ""
		}
		return 0, s, d, name
	}
	e, s, d, name := linux()
	switch {
	case e != 0 && cross && e != syscall.EXDEV:
		return xrefuse(e, syscall.EXDEV)
	case e != 0:
		return xrefuse(e)
	}
	return outcome{apply: func() {
		d.kids[name] = s
		s.links++
	}}
}

// predictRename is renameat2. Within a partition: Linux's checks in
// do_renameat2's and vfs_rename's order. Across partitions the source's
// partition checks its side first and the target's then (the protocol's
// prepares), and a node that cannot move is refused (EXDEV: a hard-linked
// file, or one below a moving directory;
// EBUSY: a mount point); where the two orders differ, either first error
// is right.
func (m *xmodel) predictRename(o xop) outcome {
	noreplace := o.flags&client.RenameNoReplace != 0
	exchange := o.flags&client.RenameExchange != 0
	cross := xpartOf(o.a) != xpartOf(o.b)
	sp, sn, spErr := m.parent(o.a)
	dp, dn, dpErr := m.parent(o.b)
	var s, d *xnode
	if spErr == nil {
		s = sp.kids[sn]
	}
	if dpErr == nil {
		d = dp.kids[dn]
	}
	// notMovable is why a node cannot change partition.
	notMovable := func(n *xnode) syscall.Errno {
		switch {
		case n.mount:
			return syscall.EBUSY
		case xhardLinked(n):
			return syscall.EXDEV
		}
		return 0
	}
	noop := false
	linux := func() syscall.Errno {
		switch {
		case spErr != nil:
			return xerrno(spErr)
		case dpErr != nil:
			return xerrno(dpErr)
		case s == nil:
			return syscall.ENOENT
		case noreplace && d != nil:
			return syscall.EEXIST
		case exchange && d == nil:
			return syscall.ENOENT
		}
		// lock_rename's trap.
		if sp != dp {
			if s.dir() && xbelow(path.Dir(o.b), o.a) {
				return syscall.EINVAL
			}
			if d != nil && d.dir() && xbelow(path.Dir(o.a), o.b) {
				if exchange {
					return syscall.EINVAL
				}
				return syscall.ENOTEMPTY
			}
		}
		if s == d {
			noop = true
			return 0
		}
		if !exchange && d != nil {
			if s.dir() && !d.dir() {
				return syscall.ENOTDIR
			}
			if !s.dir() && d.dir() {
				return syscall.EISDIR
			}
		}
		if s.mount || d != nil && d.mount {
			return syscall.EBUSY
		}
		if !exchange && d != nil && d.dir() && len(d.kids) > 0 {
			return syscall.ENOTEMPTY
		}
		if cross {
			if e := notMovable(s); e != 0 {
				return e
			}
			if exchange {
				if e := notMovable(d); e != 0 {
					return e
				}
			}
		}
		return 0
	}
	sides := func() syscall.Errno {
		// The source's partition.
		switch {
		case spErr != nil:
			return xerrno(spErr)
		case s == nil:
			return syscall.ENOENT
		}
		if e := notMovable(s); e != 0 {
			return e
		}
		// The target's.
		switch {
		case dpErr != nil:
			return xerrno(dpErr)
		case noreplace && d != nil:
			return syscall.EEXIST
		case exchange && d == nil:
			return syscall.ENOENT
		case d == nil:
			return 0
		case d.mount:
			return syscall.EBUSY
		case exchange:
			return notMovable(d)
		case s.dir() && !d.dir():
			return syscall.ENOTDIR
		case !s.dir() && d.dir():
			return syscall.EISDIR
		case d.dir() && len(d.kids) > 0:
			return syscall.ENOTEMPTY
		}
		return 0
	}
	e := linux()
	var errs []syscall.Errno
	if e != 0 {
		errs = append(errs, e)
	}
	if cross {
		if e2 := sides(); e2 != 0 && !slices.Contains(errs, e2) {
			errs = append(errs, e2)
		}
		if len(errs) > 0 && e == 0 {
			panic(fmt.Sprintf("model: %s: the two orders disagree on success", o))
		}
	}
	// A mount point is also the root of its partition, which Linux
	// refuses as the source with EBUSY before anything else, and as the
	// target right after the parents' lookups with EBUSY (EEXIST under
	// RENAME_NOREPLACE).
	if len(errs) > 0 && (s != nil && s.mount || d != nil && d.mount) {
		if !slices.Contains(errs, syscall.EBUSY) {
			errs = append(errs, syscall.EBUSY)
		}
		if noreplace && d != nil && d.mount && !slices.Contains(errs, syscall.EEXIST) {
			errs = append(errs, syscall.EEXIST)
		}
	}
	if len(errs) > 0 {
		return xrefuse(errs...)
	}
	if noop {
		if s.mount {
			// Linux renames a name onto itself with success, the root
			// of a file system onto itself with EBUSY.
			return outcome{errs: []syscall.Errno{syscall.EBUSY}, mayPass: true}
		}
		return outcome{apply: func() {}}
	}
	return outcome{apply: func() {
		if exchange {
			sp.kids[sn], dp.kids[dn] = d, s
			return
		}
		delete(sp.kids, sn)
		if d != nil && !d.dir() {
			d.links--
		}
		dp.kids[dn] = s
	}}
}

// ---- the generator ----

type xgen struct {
	rng *rand.Rand
	m   *xmodel
}

func (g *xgen) pct() int { return g.rng.IntN(100) }

func (g *xgen) name() string { return xnames[g.rng.IntN(len(xnames))] }

// existing returns the path of a random entry satisfying keep ("" if none).
func (g *xgen) existing(keep func(*xnode) bool) string {
	var ps []string
	g.m.each(func(p string, n *xnode) {
		if !n.mount && (keep == nil || keep(n)) {
			ps = append(ps, p)
		}
	})
	if len(ps) == 0 {
		return ""
	}
	return ps[g.rng.IntN(len(ps))]
}

// dir returns a random directory, in partition part unless part < 0.
func (g *xgen) dir(part int) string {
	ps := []string{}
	for _, p := range []string{"/", "/p1", "/p2"} {
		if part < 0 || xpartOf(p) == part {
			ps = append(ps, p)
		}
	}
	g.m.each(func(p string, n *xnode) {
		if n.dir() && !n.mount && (part < 0 || xpartOf(p) == part) {
			ps = append(ps, p)
		}
	})
	return ps[g.rng.IntN(len(ps))]
}

// random returns a path of 1 to 3 random names in a random partition.
func (g *xgen) random() string {
	p := []string{"", "/p1", "/p2"}[g.rng.IntN(3)]
	for range 1 + g.rng.IntN(3) {
		p += "/" + g.name()
	}
	return p
}

func (g *xgen) mountPoint() string { return []string{"/p1", "/p2"}[g.rng.IntN(2)] }

// source returns the path an op acts on: mostly one that exists and
// satisfies keep.
func (g *xgen) source(keep func(*xnode) bool) string {
	r := g.pct()
	switch {
	case r < 3:
		return g.mountPoint()
	case r < 75:
		if p := g.existing(keep); p != "" {
			return p
		}
	case r < 82:
		if p := g.existing(nil); p != "" {
			return p
		}
	case r < 92:
		return xjoin(g.dir(-1), g.name())
	}
	return g.random()
}

// target returns the path an op creates or renames to: mostly a name in
// an existing directory, often one of partition part (any if part < 0).
func (g *xgen) target(part int) string {
	r := g.pct()
	switch {
	case r < 3:
		return g.mountPoint()
	case r < 45:
		return xjoin(g.dir(part), g.name())
	case r < 65:
		return xjoin(g.dir(-1), g.name())
	case r < 90:
		if p := g.existing(nil); p != "" {
			return p
		}
	}
	return g.random()
}

func (g *xgen) content() []byte {
	var n int
	switch r := g.pct(); {
	case r < 8:
		n = 0
	case r < 80:
		n = 1 + g.rng.IntN(32)
	case r < 97:
		n = 100 + g.rng.IntN(2000)
	default: // larger than a slice carried inline: in the object store
		n = 70<<10 + g.rng.IntN(1000)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(g.rng.IntN(26))
	}
	return b
}

// xmodelMaxNodes bounds the tree: beyond it, ops that add names are drawn
// again as ones that do not.
const xmodelMaxNodes = 60

func (g *xgen) next() xop {
	isFile := func(n *xnode) bool { return n.kind == 'f' }
	notDir := func(n *xnode) bool { return !n.dir() }
	isDir := func(n *xnode) bool { return n.dir() }
	full := g.m.nodes() >= xmodelMaxNodes
	for {
		r := g.pct()
		switch {
		case r < 13:
			if full {
				continue
			}
			return xop{kind: "create", a: g.target(-1), data: g.content()}
		case r < 20:
			return xop{kind: "write", a: g.source(isFile), data: g.content()}
		case r < 32:
			if full {
				continue
			}
			return xop{kind: "mkdir", a: g.target(-1)}
		case r < 35:
			if full {
				continue
			}
			return xop{kind: "symlink", a: g.target(-1), target: fmt.Sprintf("/nowhere/%s%d", g.name(), g.rng.IntN(100))}
		case r < 42:
			if full {
				continue
			}
			o := xop{kind: "link", a: g.source(notDir)}
			o.b = g.target(xpartOf(o.a))
			o.byIno = g.pct() < 30 && g.m.byInoAble(o.a, true) && g.m.byInoAble(o.b, false)
			return o
		case r < 50:
			return xop{kind: "unlink", a: g.source(notDir)}
		case r < 55:
			return xop{kind: "rmdir", a: g.source(func(n *xnode) bool { return n.dir() && len(n.kids) == 0 })}
		default:
			o := xop{kind: "rename"}
			switch r := g.pct(); {
			case r < 20:
				o.flags = client.RenameNoReplace
			case r < 45:
				o.flags = client.RenameExchange
			}
			if g.pct() < 35 {
				o.a = g.source(isDir)
			} else {
				o.a = g.source(nil)
			}
			// Half an exchange's targets exist; half of the other
			// renames' targets are drawn in the source's partition, half
			// in a random one (mostly another).
			switch r := g.pct(); {
			case o.flags == client.RenameExchange && r < 50:
				o.b = g.source(nil) // most exchanges need a target
			case r < 50:
				o.b = g.target(xpartOf(o.a))
			default:
				o.b = g.target(g.rng.IntN(3))
			}
			o.byIno = g.pct() < 30 && g.m.byInoAble(o.a, false) && g.m.byInoAble(o.b, false)
			return o
		}
	}
}

// byInoAble reports whether p can be named by inode numbers: its parent
// (and, with node, p itself) exists, and p is no mount point (whose
// entry only the router's table holds).
func (m *xmodel) byInoAble(p string, node bool) bool {
	if p == "/p1" || p == "/p2" {
		return false
	}
	if node {
		_, err := m.lstat(p)
		return err == nil
	}
	_, _, err := m.parent(p)
	return err == nil
}

// ---- the run ----

type xrun struct {
	t     *testing.T
	ctx   context.Context // bounds the calls of one stretch of 50 steps
	c     *client.Client
	m     *xmodel
	seed  uint64
	steps int
	step  int
	hist  []string // the last ops and their outcomes
	stats map[string]int
	nodes int // summed over the steps
	// Every inode number each node had at a compare: a node that moved
	// between partitions must still answer to its old ones, and one that
	// is gone to none (engine/forward.go).
	numbers map[*xnode][]client.Ino
	moves   map[*xnode]int // renames between partitions of each node, itself or a directory above it
}

const xmodelHistory = 20

func (x *xrun) record(s string) {
	x.hist = append(x.hist, fmt.Sprintf("step %d: %s", x.step, s))
	if len(x.hist) > xmodelHistory {
		x.hist = x.hist[1:]
	}
}

func (x *xrun) fatalf(format string, args ...any) {
	x.t.Helper()
	x.t.Fatalf("seed %d, step %d: %s\nlast %d ops:\n  %s\nreplay: %s=%d %s=%d go test -run TestNamespaceModelAcrossPartitions ./internal/router",
		x.seed, x.step, fmt.Sprintf(format, args...), len(x.hist), strings.Join(x.hist, "\n  "),
		xmodelSeedEnv, x.seed, xmodelStepsEnv, x.steps)
}

// do applies o through the router.
func (x *xrun) do(o xop) error {
	c, ctx := x.c, x.ctx
	switch o.kind {
	case "create":
		f, err := c.OpenFile(ctx, o.a, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write(o.data); err != nil {
			f.Close()
			return fmt.Errorf("write after create: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("close after create: %w", err)
		}
		return nil
	case "write":
		return c.WriteFile(ctx, o.a, o.data, 0o644)
	case "mkdir":
		_, err := c.Mkdir(ctx, o.a, 0o755)
		return err
	case "symlink":
		_, err := c.Symlink(ctx, o.target, o.a)
		return err
	case "link":
		if o.byIno {
			s, err := c.Lstat(ctx, o.a)
			if err != nil {
				return fmt.Errorf("look up the source: %w", err)
			}
			dp, err := c.Lstat(ctx, path.Dir(o.b))
			if err != nil {
				return fmt.Errorf("look up the target's parent: %w", err)
			}
			_, err = c.LinkAt(ctx, s.Ino(), dp.Ino(), path.Base(o.b))
			return err
		}
		_, err := c.Link(ctx, o.a, o.b)
		return err
	case "unlink":
		return c.Unlink(ctx, o.a)
	case "rmdir":
		return c.Rmdir(ctx, o.a)
	case "rename":
		if o.byIno {
			sp, err := c.Lstat(ctx, path.Dir(o.a))
			if err != nil {
				return fmt.Errorf("look up the source's parent: %w", err)
			}
			dp, err := c.Lstat(ctx, path.Dir(o.b))
			if err != nil {
				return fmt.Errorf("look up the target's parent: %w", err)
			}
			return c.RenameAt(ctx, sp.Ino(), path.Base(o.a), dp.Ino(), path.Base(o.b), o.flags)
		}
		return c.RenameFlags(ctx, o.a, o.b, o.flags)
	}
	panic("unknown op " + o.kind)
}

func xerrsString(errs []syscall.Errno) string {
	var s []string
	for _, e := range errs {
		s = append(s, xerrName(e))
	}
	return strings.Join(s, " or ")
}

func xerrName(e syscall.Errno) string {
	for _, n := range []struct {
		e syscall.Errno
		s string
	}{{syscall.ENOENT, "ENOENT"}, {syscall.ENOTDIR, "ENOTDIR"}, {syscall.EISDIR, "EISDIR"}, {syscall.EEXIST, "EEXIST"},
		{syscall.ENOTEMPTY, "ENOTEMPTY"}, {syscall.EXDEV, "EXDEV"}, {syscall.EBUSY, "EBUSY"}, {syscall.EINVAL, "EINVAL"},
		{syscall.EPERM, "EPERM"}, {syscall.EACCES, "EACCES"}, {syscall.ESTALE, "ESTALE"}} {
		if n.e == e {
			return n.s
		}
	}
	return fmt.Sprintf("errno %d", int(e))
}

// stepOnce draws, predicts, applies and checks one op.
func (x *xrun) stepOnce(g *xgen) {
	x.t.Helper()
	o := g.next()
	want := x.m.predict(o)
	err := x.do(o)
	got := "ok"
	if err != nil {
		got = fmt.Sprintf("%v", err)
	}
	if want.errs == nil {
		x.record(fmt.Sprintf("%s -> %s", o, got))
		if err != nil {
			x.fatalf("%s: %v, want success", o, err)
		}
		if o.kind == "rename" && xpartOf(o.a) != xpartOf(o.b) {
			x.stats[x.m.crossKind(o)]++
			x.countMoves(o)
		}
		if o.kind == "rename" && o.a != o.b && x.m.mustLstat(o.a) == x.m.mustLstat(o.b) {
			x.stats["rename: two names of one node"]++
		}
		want.apply()
		x.stats[o.kind+" ok"]++
	} else {
		x.record(fmt.Sprintf("%s -> %s (want %s)", o, got, xerrsString(want.errs)))
		e := xerrno(err)
		if (err != nil || !want.mayPass) && !slices.Contains(want.errs, e) {
			x.fatalf("%s: %s, want %s", o, got, xerrsString(want.errs))
		}
		switch {
		case err == nil:
			x.stats[o.kind+" ok (no change)"]++
		default:
			x.stats[o.kind+" "+xerrName(e)]++
			alts := slices.DeleteFunc(slices.Clone(want.errs), func(v syscall.Errno) bool { return v == syscall.EEXIST })
			if len(alts) > 1 { // which of two right answers the service chose
				x.stats[fmt.Sprintf("%s: %s of %s", o.kind, xerrName(e), xerrsString(want.errs))]++
			}
		}
	}
	x.nodes += x.m.nodes()
	// The paths the op named, at once.
	for _, p := range []string{o.a, o.b} {
		if p != "" {
			x.checkPath(o, p)
		}
	}
}

// crossKind names the kind of a rename across partitions that succeeds,
// for the summary of a run.
func (m *xmodel) crossKind(o xop) string {
	s, _ := m.lstat(o.a)
	d, _ := m.lstat(o.b)
	what := map[byte]string{'f': "file", 'l': "symlink", 'd': "directory"}[s.kind]
	switch {
	case o.flags == client.RenameExchange:
		return fmt.Sprintf("across partitions: exchange %s with %s", what, map[byte]string{'f': "file", 'l': "symlink", 'd': "directory"}[d.kind])
	case s.dir():
		n := 0
		var count func(*xnode)
		count = func(d *xnode) {
			for _, k := range d.kids {
				n++
				if k.dir() {
					count(k)
				}
			}
		}
		count(s)
		what = fmt.Sprintf("directory holding %s", map[bool]string{true: "nothing", false: "1-3 nodes"}[n == 0])
		if n > 3 {
			what = "directory holding 4 or more nodes"
		}
	}
	if d != nil {
		return "across partitions: " + what + ", replacing"
	}
	return "across partitions: " + what
}

// checkPath compares what Lstat finds at p with the model.
func (x *xrun) checkPath(o xop, p string) {
	x.t.Helper()
	n, merr := x.m.lstat(p)
	fi, err := x.c.Lstat(x.ctx, p)
	switch {
	case merr != nil:
		if err == nil || xerrno(err) != xerrno(merr) {
			x.fatalf("after %s: lstat %s: %v, want %v", o, p, err, merr)
		}
	case err != nil:
		x.fatalf("after %s: lstat %s: %v, want %s", o, p, err, xdescribe(n))
	case xtypeOf(fi.Mode()) != n.kind:
		x.fatalf("after %s: lstat %s: mode %v, want %s", o, p, fi.Mode(), xdescribe(n))
	case n.kind == 'f' && fi.Size() != int64(len(n.data)):
		x.fatalf("after %s: lstat %s: size %d, want %d", o, p, fi.Size(), len(n.data))
	case p != "/p1" && p != "/p2" && int(fi.Ino().Partition()) != xpartOf(p):
		x.fatalf("after %s: lstat %s: inode %d of partition %d", o, p, fi.Ino(), fi.Ino().Partition())
	}
}

func xtypeOf(m fs.FileMode) byte {
	switch {
	case m.IsDir():
		return 'd'
	case m.IsRegular():
		return 'f'
	case m&fs.ModeSymlink != 0:
		return 'l'
	}
	return '?'
}

func xdescribe(n *xnode) string {
	switch n.kind {
	case 'd':
		return fmt.Sprintf("a directory of %d entries", len(n.kids))
	case 'f':
		return fmt.Sprintf("a file of %d bytes, %d links", len(n.data), n.links)
	}
	return "a symlink to " + n.target
}

// modelLines describes the model's tree, one line a node, sorted.
func (x *xrun) modelLines() []string {
	var out []string
	x.m.each(func(p string, n *xnode) {
		out = append(out, xnodeLine(p, n.kind, x.links(p, n), n.data, n.target))
	})
	slices.Sort(out)
	return out
}

func (x *xrun) links(p string, n *xnode) int {
	if n.dir() {
		return xdirLinks(n)
	}
	return n.links
}

func xnodeLine(p string, kind byte, links int, data []byte, target string) string {
	switch kind {
	case 'f':
		return fmt.Sprintf("%s file links=%d size=%d sha=%x", p, links, len(data), sha256.Sum256(data))
	case 'l':
		return fmt.Sprintf("%s symlink links=%d -> %s", p, links, target)
	}
	return fmt.Sprintf("%s dir links=%d", p, links)
}

// compare lists the whole tree through the router and compares it with
// the model: names, types, link counts, file contents, symlink targets,
// and which names share a node.
func (x *xrun) compare() {
	x.t.Helper()
	var got []string
	inoOf := map[string]client.Ino{} // path -> inode number seen
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := x.c.ReadDir(x.ctx, dir)
		if err != nil {
			x.fatalf("compare: readdir %s: %v", dir, err)
		}
		for _, e := range ents {
			p := xjoin(dir, e.Name())
			info, err := e.Info()
			if err != nil {
				x.fatalf("compare: %s: listing without attributes: %v", p, err)
			}
			a := info.Sys().(*client.Attr)
			inoOf[p] = a.Ino
			kind := xtypeOf(info.Mode())
			var data []byte
			var target string
			switch kind {
			case 'f':
				if data, err = x.c.ReadFile(x.ctx, p); err != nil {
					x.fatalf("compare: read %s: %v", p, err)
				}
				if int64(len(data)) != info.Size() {
					x.fatalf("compare: %s: %d bytes read, size %d", p, len(data), info.Size())
				}
			case 'l':
				if target, err = x.c.Readlink(x.ctx, p); err != nil {
					x.fatalf("compare: readlink %s: %v", p, err)
				}
			}
			got = append(got, xnodeLine(p, kind, int(a.Nlink), data, target))
			if kind == 'd' {
				walk(p)
			}
		}
	}
	walk("/")
	slices.Sort(got)
	want := x.modelLines()
	if !slices.Equal(got, want) {
		x.fatalf("the tree differs from the model:\n%s", xlineDiff(got, want))
	}
	// The same node at the same number, different nodes at different
	// numbers, each in the partition of its path.
	byNode := map[*xnode]client.Ino{}
	byIno := map[client.Ino]string{}
	x.m.each(func(p string, n *xnode) {
		ino := inoOf[p]
		if !n.mount && int(ino.Partition()) != xpartOf(p) {
			x.fatalf("compare: %s is inode %d of partition %d", p, ino, ino.Partition())
		}
		if prev, ok := byNode[n]; ok && prev != ino {
			x.fatalf("compare: %s is inode %d, another name of it inode %d", p, ino, prev)
		}
		byNode[n] = ino
		if q, ok := byIno[ino]; ok && x.m.mustLstat(q) != n {
			x.fatalf("compare: %s and %s are both inode %d", p, q, ino)
		}
		byIno[ino] = p
	})
	x.checkOldNumbers(byNode)
}

// countMoves counts a rename between partitions for every node that moves
// with it: the source's subtree, and for an exchange the target's.
func (x *xrun) countMoves(o xop) {
	if x.moves == nil {
		x.moves = map[*xnode]int{}
	}
	var count func(n *xnode)
	count = func(n *xnode) {
		x.moves[n]++
		for _, k := range n.kids {
			count(k)
		}
	}
	count(x.m.mustLstat(o.a))
	if o.flags == client.RenameExchange {
		count(x.m.mustLstat(o.b))
	}
}

// checkOldNumbers checks, by getattr, that each node of the model answers
// at every inode number it had before (forwarded to where it is, with
// its number now), and that the old numbers of nodes no longer in the
// model answer ENOENT or ESTALE; then it adds the numbers of now.
func (x *xrun) checkOldNumbers(now map[*xnode]client.Ino) {
	x.t.Helper()
	if x.numbers == nil {
		x.numbers = map[*xnode][]client.Ino{}
	}
	for n, inos := range x.numbers {
		cur, live := now[n]
		for _, old := range inos {
			fi, err := x.c.GetAttr(x.ctx, old)
			switch {
			case !live && err == nil:
				x.fatalf("compare: inode %d of a node that is gone answers as inode %d", old, fi.Ino())
			case !live && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ESTALE):
				x.fatalf("compare: inode %d of a node that is gone: %v", old, err)
			case live && errors.Is(err, syscall.ESTALE) && x.moves[n] > maxMovedHops:
				// Each move between partitions may add a hop to the
				// chain of forwards: past the router's bound, ESTALE.
				x.stats["old numbers past the hop bound"]++
			case live && err != nil:
				x.fatalf("compare: old inode %d of the node now inode %d (moved %d times): %v", old, cur, x.moves[n], err)
			case live && fi.Ino() != cur:
				x.fatalf("compare: old inode %d answers as inode %d, not %d", old, fi.Ino(), cur)
			}
		}
		if !live {
			delete(x.numbers, n)
		}
	}
	for n, ino := range now {
		if !n.mount && !slices.Contains(x.numbers[n], ino) {
			x.numbers[n] = append(x.numbers[n], ino)
			x.stats["numbers kept"]++
		}
	}
}

func (m *xmodel) mustLstat(p string) *xnode {
	n, _ := m.lstat(p)
	return n
}

// xlineDiff lists the lines only in got (+) and only in want (-).
func xlineDiff(got, want []string) string {
	var b strings.Builder
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "  + %s\n", l)
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "  - %s (model)\n", l)
		}
	}
	return b.String()
}

func runXModel(t *testing.T, seed uint64, steps int) {
	f := newXFixture(t, Config{})
	x := &xrun{t: t, ctx: testCtx(t), c: f.c, m: newXModel(), seed: seed, steps: steps, stats: map[string]int{}}
	g := &xgen{rng: rand.New(rand.NewPCG(seed, 0x63616e6f7079)), m: x.m}
	for x.step = 1; x.step <= steps; x.step++ {
		x.stepOnce(g)
		if x.step%50 == 0 {
			x.compare()
			x.ctx = testCtx(t) // the next 50 steps get a bound of their own
		}
	}
	x.step = steps
	x.compare()
	// The sources forget their intents after the replies (step 5 runs in
	// the background): wait, bounded, for none to be left.
	deadline := time.Now().Add(bound)
	for vp := range uint16(3) {
		for in := f.intents(t, vp); len(in) != 0; in = f.intents(t, vp) {
			if time.Now().After(deadline) {
				x.fatalf("partition %d holds %d rename intents at the end", vp, len(in))
			}
			time.Sleep(time.Millisecond)
		}
	}
	f.verify(t)
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(x.stats)) {
		lines = append(lines, fmt.Sprintf("%s: %d", k, x.stats[k]))
	}
	t.Logf("seed %d, %d steps, %.1f nodes on average, %d at the end; outcomes:\n  %s",
		seed, steps, float64(x.nodes)/float64(steps), x.m.nodes(), strings.Join(lines, "\n  "))
}
