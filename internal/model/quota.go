package model

import (
	"errors"
	"fmt"
	"sort"
	"syscall"
)

// Directory quotas, as the model has them. A quota on a directory limits
// the nodes below it (each node once, the directory itself not counted)
// and the sizes of the regular files below it; 0 is no limit. Every quota
// over a place holds: a change that makes a quota's count of nodes or of
// bytes grow past its limit fails with EDQUOT, after every other check.
// A quota cannot be set in the snapshot area (EROFS, snapshot.go). All
// the links of a node lie below the same nearest quota: a change that
// would put them under different ones fails with EXDEV, checked just
// before EDQUOT. Only root sets and removes quotas (EPERM); a directory
// without one answers ENODATA; limits below the usage are EDQUOT; removing
// a directory removes its quota.
//
// The oracle keeps only the limits and counts the usage from its tree
// whenever it needs it; a rename is tried on the tree and undone to see
// what it would do. Slow, and independent of how a target keeps usage.

// Quota is a directory quota's limits and usage.
type Quota struct {
	MaxFiles, MaxBytes uint64
	Files, Bytes       uint64
}

func (q Quota) String() string {
	return fmt.Sprintf("files=%d bytes=%d max_files=%d max_bytes=%d", q.Files, q.Bytes, q.MaxFiles, q.MaxBytes)
}

// QuotaNamespace is the optional part of a Namespace that has directory
// quotas; the quota ops need it.
type QuotaNamespace interface {
	SetQuota(c Cred, dir Ino, maxFiles, maxBytes uint64) (Quota, error)
	GetQuota(dir Ino) (Quota, error)
	RemoveQuota(c Cred, dir Ino) error
}

var _ QuotaNamespace = (*Oracle)(nil)

// errNoQuotas is a target without quotas asked for a quota op.
var errNoQuotas = errors.New("model: the namespace has no quotas")

// applyQuota runs a quota op on directory ino; a wrapped errno (a target
// may say more than the errno) counts as the errno.
func applyQuota(ns Namespace, op Op, ino Ino) (string, error) {
	qn, ok := ns.(QuotaNamespace)
	if !ok {
		return "", errNoQuotas
	}
	var q Quota
	var err error
	switch op.Kind {
	case KQuotaSet:
		q, err = qn.SetQuota(op.Cred, ino, op.Files, op.Bytes)
	case KQuotaGet:
		q, err = qn.GetQuota(ino)
	default:
		err = qn.RemoveQuota(op.Cred, ino)
	}
	var errno syscall.Errno
	if err != nil && errors.As(err, &errno) {
		return "", errno
	}
	if err != nil || op.Kind == KQuotaRm {
		return "", err
	}
	return q.String(), nil
}

// SetQuota is the model's rule for setting a quota.
func (m *Oracle) SetQuota(c Cred, dir Ino, maxFiles, maxBytes uint64) (Quota, error) {
	if c.UID != 0 {
		return Quota{}, syscall.EPERM
	}
	d, err := m.dirNode(dir)
	if err != nil {
		return Quota{}, err
	}
	if err := m.roErr(d); err != nil {
		return Quota{}, err
	}
	lim := Quota{MaxFiles: maxFiles, MaxBytes: maxBytes}
	old, had := m.quotas[dir]
	if m.quotas == nil {
		m.quotas = map[Ino]Quota{}
	}
	m.quotas[dir] = lim
	undo := func() {
		if had {
			m.quotas[dir] = old
		} else {
			delete(m.quotas, dir)
		}
	}
	if !had && m.linksSplit() {
		undo()
		return Quota{}, syscall.EXDEV
	}
	files, bytes := m.usage(dir)
	if maxFiles > 0 && files > maxFiles || maxBytes > 0 && bytes > maxBytes {
		undo()
		return Quota{}, syscall.EDQUOT
	}
	lim.Files, lim.Bytes = files, bytes
	return lim, nil
}

// GetQuota is the model's quota of dir, counted.
func (m *Oracle) GetQuota(dir Ino) (Quota, error) {
	if _, err := m.dirNode(dir); err != nil {
		return Quota{}, err
	}
	q, ok := m.quotas[dir]
	if !ok {
		return Quota{}, syscall.ENODATA
	}
	q.Files, q.Bytes = m.usage(dir)
	return q, nil
}

// RemoveQuota is the model's rule for removing a quota.
func (m *Oracle) RemoveQuota(c Cred, dir Ino) error {
	if c.UID != 0 {
		return syscall.EPERM
	}
	if _, err := m.dirNode(dir); err != nil {
		return err
	}
	if _, ok := m.quotas[dir]; !ok {
		return syscall.ENODATA
	}
	delete(m.quotas, dir)
	return nil
}

// usage counts the nodes and bytes below directory dir, each node once.
func (m *Oracle) usage(dir Ino) (files, bytes uint64) {
	seen := map[Ino]bool{}
	var walk func(d *node)
	walk = func(d *node) {
		for _, ino := range d.ents {
			if seen[ino] {
				continue
			}
			seen[ino] = true
			n := m.nodes[ino]
			files++
			if n.dir() {
				walk(n)
			} else if n.typ == S_IFREG {
				bytes += n.size
			}
		}
	}
	walk(m.nodes[dir])
	return files, bytes
}

// nearestQuota returns directory d or the nearest ancestor with a quota,
// or 0.
func (m *Oracle) nearestQuota(d *node) Ino {
	for {
		if _, ok := m.quotas[d.ino]; ok {
			return d.ino
		}
		if d.ino == m.root {
			return 0
		}
		d = m.parentOf(d)
	}
}

// linksSplit reports whether some node has links below different nearest
// quotas.
func (m *Oracle) linksSplit() bool {
	region := map[Ino]Ino{}
	for _, d := range m.nodes {
		if !d.dir() || len(d.ents) == 0 {
			continue
		}
		q := m.nearestQuota(d)
		for _, ino := range d.ents {
			if m.nodes[ino].dir() {
				continue
			}
			if r, ok := region[ino]; ok && r != q {
				return true
			}
			region[ino] = q
		}
	}
	return false
}

// quotaUsage counts every quota's usage.
func (m *Oracle) quotaUsage() map[Ino][2]uint64 {
	out := make(map[Ino][2]uint64, len(m.quotas))
	for dir := range m.quotas {
		f, b := m.usage(dir)
		out[dir] = [2]uint64{f, b}
	}
	return out
}

// quotaTry applies change to the tree, sees whether it splits a node's
// links (EXDEV) or takes a quota's growing count past its limit (EDQUOT),
// and undoes it.
func (m *Oracle) quotaTry(change, undo func()) error {
	if len(m.quotas) == 0 {
		return nil
	}
	before := m.quotaUsage()
	change()
	defer undo()
	if m.linksSplit() {
		return syscall.EXDEV
	}
	after := m.quotaUsage()
	dirs := make([]Ino, 0, len(after))
	for dir := range after {
		dirs = append(dirs, dir)
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i] < dirs[j] })
	for _, dir := range dirs {
		q, b, a := m.quotas[dir], before[dir], after[dir]
		if a[0] > b[0] && q.MaxFiles > 0 && a[0] > q.MaxFiles || a[1] > b[1] && q.MaxBytes > 0 && a[1] > q.MaxBytes {
			return syscall.EDQUOT
		}
	}
	return nil
}

// quotaCreate checks that one more node fits below directory d.
func (m *Oracle) quotaCreate(d *node) error {
	for dir := m.nearestQuota(d); dir != 0; {
		q := m.quotas[dir]
		if files, _ := m.usage(dir); q.MaxFiles > 0 && files+1 > q.MaxFiles {
			return syscall.EDQUOT
		}
		if dir == m.root {
			break
		}
		dir = m.nearestQuota(m.parentOf(m.nodes[dir]))
	}
	return nil
}

// quotaGrow checks that the regular file n may grow to size.
func (m *Oracle) quotaGrow(n *node, size uint64) error {
	if size <= n.size {
		return nil
	}
	old := n.size
	return m.quotaTry(func() { n.size = size }, func() { n.size = old })
}

// quotaOverNode is the nearest quota over a non-directory's links (0 if
// none, or if it has no link).
func (m *Oracle) quotaOverNode(ino Ino) Ino {
	for _, d := range m.nodes {
		if !d.dir() {
			continue
		}
		for _, child := range d.ents {
			if child == ino {
				return m.nearestQuota(d)
			}
		}
	}
	return 0
}

// quota is a generated quota op: mostly on an existing directory, with
// limits near its usage so that they are reached.
func (g *Generator) quota() Op {
	c := CredRoot
	if g.chance(10) {
		c = g.cred()
	}
	path := g.existing(S_IFDIR)
	if g.chance(20) {
		path = "/"
	}
	switch r := g.pick(20); {
	case r < 12:
		op := Op{Kind: KQuotaSet, Cred: c, Path: path}
		if a, err := g.o.Resolve(CredRoot, path, true); err == nil && a.Mode&S_IFMT == S_IFDIR {
			files, bytes := g.o.usage(a.Ino)
			if g.chance(80) {
				op.Files = max(files+uint64(g.pick(4)), 1) - uint64(g.pick(2))
			}
			if g.chance(60) {
				op.Bytes = max(bytes+genSizes[g.pick(len(genSizes))], 1) - uint64(g.pick(2))
			}
		}
		return op
	case r < 17:
		return Op{Kind: KQuotaGet, Cred: c, Path: path}
	}
	return Op{Kind: KQuotaRm, Cred: c, Path: path}
}

// tryRename returns a change that makes the entries of a rename of src
// (od/name) to nd/newName, replacing dst or exchanging with it, and
// nothing else, and the change that undoes it: what quotaTry needs to try
// a rename.
func (m *Oracle) tryRename(od *node, name string, src, nd *node, newName string, dst *node, exchange bool) (change, undo func()) {
	oldParent := src.parent
	var dstParent Ino
	if dst != nil {
		dstParent = dst.parent
	}
	change = func() {
		if exchange {
			od.ents[name], nd.ents[newName] = dst.ino, src.ino
			if dst.dir() {
				dst.parent = od.ino
			}
		} else {
			delete(od.ents, name)
			nd.ents[newName] = src.ino
		}
		if src.dir() {
			src.parent = nd.ino
		}
	}
	undo = func() {
		if exchange {
			od.ents[name], nd.ents[newName] = src.ino, dst.ino
		} else {
			delete(nd.ents, newName)
			if dst != nil {
				nd.ents[newName] = dst.ino
			}
			od.ents[name] = src.ino
		}
		src.parent = oldParent
		if dst != nil {
			dst.parent = dstParent
		}
	}
	return change, undo
}
