package model

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/canopyfs/canopy/internal/trashname"
)

// The trash, as the model has it. With the trash on (Config.Trash), a
// removal that would free a node moves it instead to
// /.trash/<hour>/<parent>-<ino>-<name> (the name cut to fit 255 bytes):
// an unlink of a non-directory's last link, an rmdir, and a rename that
// replaces a non-directory's last link. <hour> is the hour of the
// removal, 2006-01-02-15 in UTC. The trash and its hour directories are
// made as root would make them (mkdir, mode 0700), when first needed; a
// removal whose move cannot be made (the mkdir fails, the entry name is
// taken, a quota refuses the move) frees as without the trash, and so
// does a removal in the trash itself and one of the trash directory.
//
// A restore puts an entry back under its name in the directory it was
// removed from, after that directory if it lies in the trash itself; an
// hour directory left empty goes. Only root restores (EPERM); an entry the
// trash does not hold is ENOENT, a name the trash did not give EINVAL, a
// directory that is gone ENOENT, a name taken again EEXIST, and a quota
// the move would break EDQUOT. A purge frees the hour directories whose
// hour ended by a time (or all of them), as root.

// TrashEntry is one entry of an hour directory of the trash.
type TrashEntry struct {
	Hour, Name   string
	Ino, Parent  Ino
	Orig, Path   string
	Files, Bytes uint64
}

// TrashNamespace is the optional part of a Namespace that has a trash;
// the trash ops need it.
type TrashNamespace interface {
	TrashList() []TrashEntry
	TrashRestore(c Cred, hour, name string, now int64) ([]string, error)
	TrashRestoreHour(c Cred, hour string, now int64) ([]string, error)
	TrashPurge(c Cred, before, now int64) (files, bytes uint64, err error)
}

var _ TrashNamespace = (*Oracle)(nil)

const (
	trashName       = ".trash"
	trashHourFormat = "2006-01-02-15"
)

// errNoTrash is a target without a trash asked for a trash op.
var errNoTrash = errors.New("model: the namespace has no trash")

// SetTrash turns the oracle's trash on or off.
func (m *Oracle) SetTrash(on bool) { m.trash = on }

// applyTrash runs a trash op; a wrapped errno counts as the errno.
func applyTrash(ns Namespace, op Op, now int64) (string, error) {
	tn, ok := ns.(TrashNamespace)
	if !ok {
		return "", errNoTrash
	}
	var text string
	var err error
	switch op.Kind {
	case KTrashLs:
		text = formatTrash(tn.TrashList())
	case KTrashRestore:
		var paths []string
		if op.Name2 == "" {
			paths, err = tn.TrashRestoreHour(op.Cred, op.Name, now)
		} else {
			paths, err = tn.TrashRestore(op.Cred, op.Name, op.Name2, now)
		}
		text = formatNames(paths)
	default:
		before := now
		if op.Flags&1 != 0 {
			before = math.MaxInt64
		}
		var files, bytes uint64
		files, bytes, err = tn.TrashPurge(op.Cred, before, now)
		text = fmt.Sprintf("files=%d bytes=%d", files, bytes)
	}
	var errno syscall.Errno
	if err != nil && errors.As(err, &errno) {
		return "", errno
	}
	return text, err
}

func formatTrash(list []TrashEntry) string {
	var b strings.Builder
	for _, t := range list {
		fmt.Fprintf(&b, "%s/%s ino=%d parent=%d orig=%q path=%q files=%d bytes=%d\n",
			t.Hour, t.Name, t.Ino.Local(), t.Parent.Local(), t.Orig, t.Path, t.Files, t.Bytes)
	}
	return b.String()
}

// trashRoot returns /.trash, or nil if there is none.
func (m *Oracle) trashRoot() *node {
	ino, ok := m.nodes[m.root].ents[trashName]
	if !ok || !m.nodes[ino].dir() {
		return nil
	}
	return m.nodes[ino]
}

// inTrash reports whether directory d is the trash or lies below it.
func (m *Oracle) inTrash(d *node) bool {
	t := m.trashRoot()
	if t == nil {
		return false
	}
	for d.ino != m.root {
		if d.ino == t.ino {
			return true
		}
		d = m.parentOf(d)
	}
	return false
}

// trashDirAt returns the hour directory for time now, making it and the
// trash as root would; nil if it cannot.
func (m *Oracle) trashDirAt(now int64) *node {
	t := m.trashRoot()
	if t == nil {
		a, err := m.Mkdir(CredRoot, m.root, trashName, 0o700, now)
		if err != nil {
			return nil
		}
		t = m.nodes[a.Ino]
	}
	hour := time.Unix(0, now).UTC().Format(trashHourFormat)
	if ino, ok := t.ents[hour]; ok {
		if !m.nodes[ino].dir() {
			return nil
		}
		return m.nodes[ino]
	}
	a, err := m.Mkdir(CredRoot, t.ino, hour, 0o700, now)
	if err != nil {
		return nil
	}
	return m.nodes[a.Ino]
}

// trashEntryName is the name of the trash entry for entry name of
// directory parent, which named ino (internal/trashname).
func trashEntryName(parent, ino Ino, name string) string {
	return trashname.Entry(uint64(parent), uint64(ino), name, NameMax)
}

// parseTrashName splits an hour directory's entry name.
func parseTrashName(s string) (parent, ino Ino, name string, ok bool) {
	p, i, name, ok := trashname.Parse(s)
	return Ino(p), Ino(i), name, ok
}

// toTrash moves entry name of d, naming v, to the trash instead of
// removing it, and reports whether it did.
func (m *Oracle) toTrash(d *node, name string, v *node, now int64) bool {
	if !m.trash || !v.dir() && m.refs(v.ino) > 1 || m.inTrash(d) {
		return false
	}
	if t := m.trashRoot(); t != nil && t.ino == v.ino {
		return false
	}
	h := m.trashDirAt(now)
	if h == nil {
		return false
	}
	tname := trashEntryName(d.ino, v.ino, name)
	if _, ok := h.ents[tname]; ok {
		return false
	}
	return m.moveEntry(d, name, v, h, tname, now) == nil
}

// moveEntry moves entry name of from, naming n, to the free name newName
// of to, as a rename would, quotas included.
func (m *Oracle) moveEntry(from *node, name string, n, to *node, newName string, now int64) error {
	if err := m.quotaTry(m.tryRename(from, name, n, to, newName, nil, false)); err != nil {
		return err
	}
	delete(from.ents, name)
	from.mtime, from.ctime = now, now
	to.ents[newName] = n.ino
	to.mtime, to.ctime = now, now
	if n.dir() && from != to {
		n.parent = to.ino
	}
	n.ctime = now
	return nil
}

func (m *Oracle) sortedNames(d *node) []string {
	names := make([]string, 0, len(d.ents))
	for name := range d.ents {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// dirPath returns directory d's path from the root.
func (m *Oracle) dirPath(d *node) string {
	var parts []string
	for d.ino != m.root {
		p := m.parentOf(d)
		for name, ino := range p.ents {
			if ino == d.ino {
				parts = append(parts, name)
				break
			}
		}
		d = p
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return "/" + strings.Join(parts, "/")
}

// trashed finds the trash entry of node ino.
func (m *Oracle) trashed(ino Ino) (h *node, name string, ok bool) {
	t := m.trashRoot()
	if t == nil {
		return nil, "", false
	}
	for _, hino := range t.ents {
		hd := m.nodes[hino]
		if !hd.dir() {
			continue
		}
		for n, child := range hd.ents {
			if child == ino {
				return hd, n, true
			}
		}
	}
	return nil, "", false
}

// origPath is the original path of an entry removed as orig from parent.
func (m *Oracle) origPath(parent Ino, orig string, depth int) string {
	p := m.nodes[parent]
	if p == nil || !p.dir() || depth > PathMax/2 {
		return ""
	}
	var dir string
	if m.inTrash(p) {
		_, pname, ok := m.trashed(parent)
		pp, _, porig, ok2 := parseTrashName(pname)
		if !ok || !ok2 {
			return ""
		}
		if dir = m.origPath(pp, porig, depth+1); dir == "" {
			return ""
		}
	} else {
		dir = m.dirPath(p)
	}
	if dir == "/" {
		return "/" + orig
	}
	return dir + "/" + orig
}

func (m *Oracle) treeUsage(n *node) (files, bytes uint64) {
	files = 1
	if n.typ == S_IFREG {
		bytes = n.size
	}
	for _, ino := range n.ents {
		f, b := m.treeUsage(m.nodes[ino])
		files += f
		bytes += b
	}
	return files, bytes
}

// TrashList is what the trash holds, by hour and name.
func (m *Oracle) TrashList() []TrashEntry {
	t := m.trashRoot()
	if t == nil {
		return nil
	}
	var out []TrashEntry
	for _, hour := range m.sortedNames(t) {
		h := m.nodes[t.ents[hour]]
		if !h.dir() {
			continue
		}
		for _, name := range m.sortedNames(h) {
			n := m.nodes[h.ents[name]]
			te := TrashEntry{Hour: hour, Name: name, Ino: n.ino}
			if p, ino, orig, ok := parseTrashName(name); ok && ino == n.ino {
				te.Parent, te.Orig = p, orig
				te.Path = m.origPath(p, orig, 0)
			}
			te.Files, te.Bytes = m.treeUsage(n)
			out = append(out, te)
		}
	}
	return out
}

// TrashRestore is the model's restore of one entry.
func (m *Oracle) TrashRestore(c Cred, hour, name string, now int64) ([]string, error) {
	if c.UID != 0 {
		return nil, syscall.EPERM
	}
	return m.restore(hour, name, now, 0)
}

func (m *Oracle) restore(hour, name string, now int64, depth int) ([]string, error) {
	t := m.trashRoot()
	if t == nil {
		return nil, syscall.ENOENT
	}
	hino, ok := t.ents[hour]
	if !ok || !m.nodes[hino].dir() {
		return nil, syscall.ENOENT
	}
	h := m.nodes[hino]
	nino, ok := h.ents[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	n := m.nodes[nino]
	parent, ino, orig, ok := parseTrashName(name)
	if !ok || ino != n.ino {
		return nil, syscall.EINVAL
	}
	p := m.nodes[parent]
	if p == nil || !p.dir() || p.ino == t.ino || p.ino == h.ino {
		return nil, syscall.ENOENT
	}
	path := m.origPath(parent, orig, 0)
	if _, taken := p.ents[orig]; taken {
		return nil, syscall.EEXIST
	}
	var done []string
	if m.inTrash(p) {
		ph, pname, found := m.trashed(parent)
		if !found || depth > PathMax/2 {
			return nil, syscall.ENOENT
		}
		var err error
		if done, err = m.restore(m.nameIn(t, ph), pname, now, depth+1); err != nil {
			return done, err
		}
	}
	if err := m.moveEntry(h, name, n, p, orig, now); err != nil {
		return done, err
	}
	if len(h.ents) == 0 {
		if err := m.Rmdir(CredRoot, t.ino, hour, now); err != nil {
			return append(done, path), err
		}
	}
	return append(done, path), nil
}

// nameIn returns the name of d's entry in directory p.
func (m *Oracle) nameIn(p, d *node) string {
	for name, ino := range p.ents {
		if ino == d.ino {
			return name
		}
	}
	return ""
}

// TrashRestoreHour is the model's restore of a whole hour: every entry,
// by name, that is still there; the first error is returned.
func (m *Oracle) TrashRestoreHour(c Cred, hour string, now int64) ([]string, error) {
	if c.UID != 0 {
		return nil, syscall.EPERM
	}
	t := m.trashRoot()
	if t == nil {
		return nil, syscall.ENOENT
	}
	hino, ok := t.ents[hour]
	if !ok || !m.nodes[hino].dir() {
		return nil, syscall.ENOENT
	}
	var paths []string
	var first error
	for _, name := range m.sortedNames(m.nodes[hino]) {
		t := m.trashRoot()
		if t == nil {
			break
		}
		hh, ok := t.ents[hour]
		if !ok {
			continue
		}
		if _, ok := m.nodes[hh].ents[name]; !ok {
			continue
		}
		done, err := m.restore(hour, name, now, 0)
		paths = append(paths, done...)
		if err != nil && first == nil {
			first = err
		}
	}
	return paths, first
}

// TrashPurge is the model's purge of the hours that ended by before.
func (m *Oracle) TrashPurge(c Cred, before, now int64) (files, bytes uint64, err error) {
	if c.UID != 0 {
		return 0, 0, syscall.EPERM
	}
	t := m.trashRoot()
	if t == nil {
		return 0, 0, nil
	}
	for _, hour := range m.sortedNames(t) {
		start, perr := time.Parse(trashHourFormat, hour)
		if before != math.MaxInt64 && (perr != nil || start.Add(time.Hour).UnixNano() > before) {
			continue
		}
		h := m.nodes[t.ents[hour]]
		f, b := m.treeUsage(h)
		if h.dir() {
			f--
		}
		if err := m.removeTree(t, hour, now); err != nil {
			return files, bytes, err
		}
		files += f
		bytes += b
	}
	return files, bytes, nil
}

// removeTree removes entry name of d and all below it, as root.
func (m *Oracle) removeTree(d *node, name string, now int64) error {
	ino, ok := d.ents[name]
	if !ok {
		return syscall.ENOENT
	}
	n := m.nodes[ino]
	if !n.dir() {
		return m.Unlink(CredRoot, d.ino, name, now)
	}
	for _, child := range m.sortedNames(n) {
		if err := m.removeTree(n, child, now); err != nil {
			return err
		}
	}
	return m.Rmdir(CredRoot, d.ino, name, now)
}

// touchesTrash reports whether op names the trash or something in it by
// path, or the trash or one of its hour directories by inode number: ops
// that would make entries the trash does not give.
func (m *Oracle) touchesTrash(op Op) bool {
	if strings.Contains(op.Path, trashName) || strings.Contains(op.Path2, trashName) || strings.Contains(op.Target, trashName) {
		return true
	}
	t := m.trashRoot()
	if t == nil {
		return false
	}
	for _, ino := range []Ino{op.Ino, op.Ino2} {
		if ino == t.ino {
			return true
		}
		if n := m.nodes[ino]; n != nil && n.dir() && n.parent == t.ino {
			return true
		}
	}
	return false
}

// trashOp is a generated trash op: a restore of an entry the trash holds
// (or of a whole hour, or of a name it does not hold), a listing or a
// purge.
func (g *Generator) trashOp() Op {
	c := CredRoot
	if g.chance(10) {
		c = g.cred()
	}
	list := g.o.TrashList()
	switch r := g.pick(20); {
	case r < 12:
		op := Op{Kind: KTrashRestore, Cred: c, Name: "1970-01-01-00", Name2: "1-2-x"}
		if len(list) > 0 && !g.chance(10) {
			te := list[g.pick(len(list))]
			op.Name, op.Name2 = te.Hour, te.Name
			if g.chance(15) {
				op.Name2 = ""
			}
		}
		return op
	case r < 16:
		return Op{Kind: KTrashLs, Cred: c}
	}
	op := Op{Kind: KTrashPurge, Cred: c}
	if g.chance(50) {
		op.Flags = 1
	}
	return op
}
