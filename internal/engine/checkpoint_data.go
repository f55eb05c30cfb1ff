package engine

import (
	"fmt"
	"slices"
)

// Limits that bound what a checkpoint's data section may make the decoder
// allocate.
const (
	maxCkptChunks = 1 << 32
	maxCkptSlices = 1 << 20 // per chunk
)

// writeData appends the data path's state to a checkpoint: the slice
// allocator and its pending batches, every file's chunks, and the garbage
// list. Open counts and orphans are not written: after a restart nobody
// has a file open (Load rebuilds the orphan set from link counts).
func (enc *encoder) writeData(e *Engine) {
	enc.uint(e.nextSlice)
	enc.uint(uint64(len(e.pending)))
	for _, b := range e.pending {
		enc.uint(b.first)
		enc.uint(uint64(b.count))
		for _, w := range b.used {
			enc.uint(w)
		}
	}
	files := 0
	for _, n := range e.st.all() {
		if e.hasData(n) {
			files++
		}
	}
	enc.uint(uint64(files))
	for _, n := range e.st.all() {
		if !e.hasData(n) {
			continue
		}
		enc.fileChunks(e, n)
	}
	enc.garbage(e)
}

// fileChunks writes the chunks of file n, which has data.
func (enc *encoder) fileChunks(e *Engine, n *node) {
	cs := e.chunks(n)
	enc.uint(uint64(n.Ino))
	enc.uint(uint64(len(cs)))
	for _, ch := range cs {
		enc.uint(uint64(ch.idx))
		enc.uint(uint64(len(ch.slices)))
		for _, s := range ch.slices {
			enc.uint(s.ID)
			enc.uint(uint64(s.Size))
			enc.uint(uint64(s.Off))
			enc.uint(uint64(s.Len))
			enc.uint(uint64(s.Pos))
		}
	}
}

// garbage writes the garbage list, in slice order.
func (enc *encoder) garbage(e *Engine) {
	ids := e.sortedGarbage()
	enc.uint(uint64(len(ids)))
	prev := uint64(0)
	for _, id := range ids {
		g := e.garbage[id]
		enc.uint(id - prev) // ascending: deltas stay short
		enc.uint(uint64(g.size))
		enc.int(g.freed)
		prev = id
	}
}

// readData reads what writeData wrote into e, whose nodes are loaded, and
// rebuilds the state derived from it: the orphan set (files with no
// links) and the counts of slices used by more than one chunk.
func (d *decoder) readData(e *Engine) {
	e.initData()
	e.nextSlice = d.uint()
	if d.err == nil && (e.nextSlice < 1 || e.nextSlice >= 1<<localBits) {
		d.err = fmt.Errorf("slice allocator at %d", e.nextSlice)
	}
	np := d.uint()
	if d.err == nil && np > maxPendingBatches {
		d.err = fmt.Errorf("%d pending slice batches", np)
	}
	for i := uint64(0); i < np && d.err == nil; i++ {
		b := &allocBatch{first: d.uint(), count: d.uint32()}
		if d.err == nil && (b.count == 0 || b.count > MaxAllocSlices) {
			d.err = fmt.Errorf("slice batch of %d", b.count)
			return
		}
		b.used = make([]uint64, (b.count+63)/64)
		for k := range b.used {
			b.used[k] = d.uint()
		}
		for k := uint64(0); k < uint64(b.count); k++ {
			if b.used[k/64]&(1<<(k%64)) == 0 {
				b.left++
			}
		}
		e.pending = append(e.pending, b)
	}
	files := d.uint()
	for i := uint64(0); i < files && d.err == nil; i++ {
		ino := Ino(d.uint())
		nc := d.uint()
		if d.err != nil {
			return
		}
		n := e.node(ino)
		if n == nil || n.Mode&S_IFMT != S_IFREG || len(e.chunks(n)) > 0 || nc == 0 || nc > maxCkptChunks {
			d.err = fmt.Errorf("chunks of node %d: not a regular file, repeated, or %d chunks", ino, nc)
			return
		}
		cs := make([]chunk, 0, min(nc, 1024))
		for k := uint64(0); k < nc && d.err == nil; k++ {
			ch := chunk{idx: d.uint32()}
			ns := d.uint()
			if d.err == nil && (ns == 0 || ns > maxCkptSlices) {
				d.err = fmt.Errorf("node %d chunk %d: %d slices", ino, ch.idx, ns)
				return
			}
			ch.slices = make([]Slice, 0, min(ns, 64))
			for j := uint64(0); j < ns && d.err == nil; j++ {
				ch.slices = append(ch.slices, Slice{
					ID: d.uint(), Size: d.uint32(), Off: d.uint32(), Len: d.uint32(), Pos: d.uint32(),
				})
			}
			cs = append(cs, ch)
		}
		e.setChunks(n, cs)
	}
	ng := d.uint()
	prev := uint64(0)
	for i := uint64(0); i < ng && d.err == nil; i++ {
		id := prev + d.uint()
		size := d.uint32()
		freed := d.int()
		if d.err == nil && (id <= prev && i > 0 || id == 0) {
			d.err = fmt.Errorf("garbage ids out of order at %d", id)
			return
		}
		e.garbage[id] = garbageEntry{size: size, freed: freed}
		prev = id
	}
	if d.err != nil {
		return
	}
	for ino, n := range e.st.all() {
		if n.Nlink == 0 && !n.isDir() {
			e.orphans[ino] = struct{}{}
		}
		for _, ch := range e.chunks(n) {
			for _, s := range ch.slices {
				e.shared[s.ID]++
			}
		}
	}
	for id, k := range e.shared {
		if k <= 1 {
			delete(e.shared, id)
		} else {
			e.shared[id] = k - 1
		}
	}
	e.garbageSorted = slices.Sorted(mapsKeys(e.garbage))
}

func mapsKeys(m map[uint64]garbageEntry) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
