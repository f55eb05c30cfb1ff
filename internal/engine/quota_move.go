package engine

import "syscall"

// Moving nodes between quotas: a rename whose two directories lie under
// different nearest quotas, and setting or removing a quota, which moves a
// subtree's nodes from one nearest quota to another.

// regionUsage walks what lies below directory d down to the directories
// that have a quota of their own: it returns the nodes and bytes below d
// (a directory with a quota counts as itself plus its quota's usage, so
// its subtree is not walked) and the slots of the non-directories whose
// nearest quota is d's or would be, each once. A node there with links
// outside d's subtree is EXDEV: moving the region would put its links
// under different quotas.
func (e *Engine) regionUsage(d *node) (files, bytes uint64, region []uint32, err error) {
	var multi map[uint32]uint32 // slots of nodes with several links: links seen
	stack := []*node{d}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		e.st.extraOf(n).dir.each(func(_ []byte, slot uint32) bool {
			c := e.peekAt(slot)
			if c.isDir() {
				files++
				if u, ok := e.quota.dirs[c.Ino]; ok {
					files += u.files
					bytes += u.bytes
				} else {
					stack = append(stack, c)
				}
				return true
			}
			if c.Nlink > 1 {
				if multi == nil {
					multi = make(map[uint32]uint32)
				}
				multi[slot]++
				if multi[slot] > 1 {
					return true
				}
			}
			files++
			bytes += bytesOf(c)
			region = append(region, slot)
			return true
		})
	}
	for slot, links := range multi {
		if links < e.peekAt(slot).Nlink {
			return 0, 0, nil, syscall.EXDEV
		}
	}
	return files, bytes, region, nil
}

// quotaMove is what a rename moves from one nearest quota to another.
type quotaMove struct {
	from, to     Ino
	files, bytes uint64
	self         Ino      // the moved non-directory, or 0
	region       []uint32 // non-directories below a moved directory to retag
}

// moveOf says what moving n from under quota from to under quota to
// moves: nothing when they are the same quota, EXDEV for a non-directory
// with other links (or a directory with such a node below it).
func (e *Engine) moveOf(n *node, from, to Ino) (quotaMove, error) {
	m := quotaMove{from: from, to: to}
	if from == to {
		return m, nil
	}
	switch {
	case !n.isDir():
		if n.Nlink > 1 {
			return quotaMove{}, syscall.EXDEV
		}
		m.files, m.bytes, m.self = 1, bytesOf(n), n.Ino
	case e.quota.dirs[n.Ino] != nil:
		u := e.quota.dirs[n.Ino]
		m.files, m.bytes = 1+u.files, u.bytes
	default:
		files, bytes, region, err := e.regionUsage(n)
		if err != nil {
			return quotaMove{}, err
		}
		m.files, m.bytes, m.region = 1+files, bytes, region
	}
	return m, nil
}

// apply moves m's usage and retags what it moves.
func (m *quotaMove) apply(e *Engine) {
	if m.from == m.to {
		return
	}
	e.quotaAdd(m.from, -int64(m.files), -int64(m.bytes))
	e.quotaAdd(m.to, int64(m.files), int64(m.bytes))
	if m.self != 0 {
		e.setRegion(e.node(m.self), m.to)
	}
	for _, slot := range m.region {
		e.setRegion(e.at(slot), m.to)
	}
}

// quotaRename checks the quotas for a rename of src from directory od to
// nd, replacing dst (nil if none) or exchanging with it, and returns the
// moves to apply once the rename is done. A quota the rename would take
// past a limit is EDQUOT; what a replaced dst frees counts.
func (e *Engine) quotaRename(od, src, nd, dst *node, exchange bool) (a, b quotaMove, err error) {
	from, to := e.nearestQuota(od.Ino), e.nearestQuota(nd.Ino)
	if from == to {
		return quotaMove{}, quotaMove{}, nil
	}
	if a, err = e.moveOf(src, from, to); err != nil {
		return
	}
	var freedFiles, freedBytes uint64
	switch {
	case exchange:
		if b, err = e.moveOf(dst, to, from); err != nil {
			return
		}
	case dst != nil && (dst.isDir() || dst.Nlink == 1):
		freedFiles, freedBytes = 1, bytesOf(dst)
	}
	// Only the quotas over one side and not the other change.
	if err = e.quotaCheckMove(to, from, a.files, a.bytes, b.files+freedFiles, b.bytes+freedBytes); err != nil {
		return
	}
	if err = e.quotaCheckMove(from, to, b.files, b.bytes, a.files, a.bytes); err != nil {
		return
	}
	return a, b, nil
}

// quotaCheckMove checks the quotas over q that are not over other, which
// gain files and bytes and lose lessFiles and lessBytes.
func (e *Engine) quotaCheckMove(q, other Ino, files, bytes, lessFiles, lessBytes uint64) error {
	if q == 0 {
		return nil
	}
	shared := make(map[Ino]bool)
	e.eachQuota(other, func(u *quotaUse) bool { shared[u.Dir] = true; return true })
	df, db := int64(files)-int64(lessFiles), int64(bytes)-int64(lessBytes)
	if !e.eachQuota(q, func(u *quotaUse) bool { return shared[u.Dir] || !u.over(df, db) }) {
		return syscall.EDQUOT
	}
	return nil
}
