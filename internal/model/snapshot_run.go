package model

import "fmt"

// relabel takes the target's numbering of the copy a clone or snapshot
// made (the oracle numbers its copies in an order of its own; snapshot.go)
// after checking that it is a numbering of the same nodes: every entry of
// the copy looked up by inode number on the target names a node of the
// copy's numbers, the links of one node name one node, and no two nodes
// share a number. It needs inode-level lookups on the target; without
// them the oracle keeps its own numbers.
func (s *runState) relabel(step int, op Op, want Result) *Failure {
	switch op.Kind {
	case KClone, KCloneIno, KSnapCreate:
	default:
		return nil
	}
	if want.Err != 0 || want.Attr == nil || !s.allowed(Op{Kind: KLookupIno, Cred: CredRoot, Ino: want.Attr.Ino, Name: "a"}) {
		return nil
	}
	top := s.o.nodes[want.Attr.Ino]
	if top == nil {
		return nil
	}
	nodes, _ := s.o.copyNodes(CredRoot, top, nil, false)
	in := make(map[Ino]bool, len(nodes))
	for _, n := range nodes {
		in[n.ino] = true
	}
	to := map[Ino]Ino{top.ino: top.ino}   // oracle's number -> target's
	from := map[Ino]Ino{top.ino: top.ino} // target's number -> oracle's
	for _, d := range nodes {
		if !d.dir() {
			continue
		}
		for _, name := range sortedKeys(d.ents) {
			child := d.ents[name]
			probe := Op{Kind: KLookupIno, Cred: CredRoot, Ino: to[d.ino], Name: name}
			fail := func(detail string) *Failure {
				return s.fail(&Failure{Step: step, Op: op, Want: want, Detail: fmt.Sprintf("the copy on the target: %s: %s", probe, detail)})
			}
			r, err := s.t.Apply(probe, 0)
			switch {
			case err != nil:
				return fail(err.Error())
			case r.Err != 0 || r.Attr == nil:
				return fail("lookup " + r.String())
			}
			got := r.Attr.Ino
			if prev, ok := to[child]; ok {
				if prev != got {
					return fail(fmt.Sprintf("links of one node name %d and %d", prev.Local(), got.Local()))
				}
				continue
			}
			if !in[got] {
				return fail(fmt.Sprintf("node %d is not one of the copy's %d numbers from %d", got.Local(), len(nodes), top.ino.Local()))
			}
			if o, ok := from[got]; ok && o != child {
				return fail(fmt.Sprintf("two nodes have number %d", got.Local()))
			}
			to[child], from[got] = got, child
		}
	}
	s.o.renumber(to)
	return nil
}

// renumber gives the nodes the mapping names their new numbers; the
// mapping permutes a set of numbers.
func (m *Oracle) renumber(to map[Ino]Ino) {
	f := func(ino Ino) Ino {
		if n, ok := to[ino]; ok {
			return n
		}
		return ino
	}
	nodes := make(map[Ino]*node, len(m.nodes))
	for _, n := range m.nodes {
		n.ino = f(n.ino)
		if n.dir() {
			n.parent = f(n.parent)
			for name, ino := range n.ents {
				n.ents[name] = f(ino)
			}
		}
		nodes[n.ino] = n
	}
	m.nodes = nodes
	if m.quotas != nil {
		quotas := make(map[Ino]Quota, len(m.quotas))
		for ino, q := range m.quotas {
			quotas[f(ino)] = q
		}
		m.quotas = quotas
	}
	m.root = f(m.root)
}
