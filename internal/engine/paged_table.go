package engine

import "slices"

// A slab's table of chunks (and the node slab's table of released chunks'
// ghosts) is kept in pages, so that a freeze copies one pointer per page
// rather than one entry per chunk. At 100 million nodes the node slab has
// 685,000 chunks: a flat table was 16 MB of slice headers, copied on the
// apply loop at every freeze (into memory fresh from the kernel after a
// start: a pause of 50-100 ms); in pages of 1,024 it is 669 pointers.

const (
	tablePageBits = 10
	tablePage     = 1 << tablePageBits // entries a page
)

// pagedTable is a table of E indexed from 0. While a freeze is live the
// pages it holds are shared, as the chunks are (freeze.go): set copies a
// shared page before writing to it, so a freeze's copy of the table
// (frozen) keeps the entries of its moment. The table belongs to the slab
// that holds it, and is changed on the engine's owner goroutine only.
type pagedTable[E any] struct {
	pages []*[tablePage]E
	gens  []uint32 // per page: the epoch at which it was made the live table's own
	n     int      // entries
}

// len returns the number of entries.
func (t *pagedTable[E]) len() int { return t.n }

// at returns entry i, which must be below len.
func (t *pagedTable[E]) at(i uint32) E {
	return t.pages[i>>tablePageBits][i&(tablePage-1)]
}

// set writes entry i, which must be below len; a page shared with a live
// freeze (its generation below cow) is copied first and stamped epoch.
func (t *pagedTable[E]) set(i uint32, v E, epoch, cow uint32) {
	p := i >> tablePageBits
	if t.gens[p] < cow {
		own := new([tablePage]E)
		*own = *t.pages[p]
		t.pages[p], t.gens[p] = own, epoch
	}
	t.pages[p][i&(tablePage-1)] = v
}

// push appends v as entry len.
func (t *pagedTable[E]) push(v E, epoch, cow uint32) {
	if t.n&(tablePage-1) == 0 {
		t.pages = append(t.pages, new([tablePage]E))
		t.gens = append(t.gens, epoch)
	}
	t.n++
	t.set(uint32(t.n-1), v, epoch, cow)
}

// grow appends zero entries until the table has n.
func (t *pagedTable[E]) grow(n int, epoch, cow uint32) {
	var zero E
	for t.n < n {
		t.push(zero, epoch, cow)
	}
}

// frozen returns the table as it stands, for a freeze: its own list of
// the same pages, which the live table copies before changing them.
func (t *pagedTable[E]) frozen() pagedTable[E] {
	return pagedTable[E]{pages: slices.Clone(t.pages), n: t.n}
}

// all yields every entry with its index, in order.
func (t *pagedTable[E]) all(yield func(uint32, E) bool) {
	for p, page := range t.pages {
		base := p << tablePageBits
		for j := range min(tablePage, t.n-base) {
			if !yield(uint32(base+j), page[j]) {
				return
			}
		}
	}
}
