package engine

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// Load decodes the node section and the directory entries on one
// goroutine and builds the engine from them on another (the caller's), so
// that a restart uses two cores; then Check runs its walk of the tree
// and its check of the store side by side (Engine.check).
//
// The decoding goroutine (the parser) owns the checkpoint's reader from
// the first node to the last entry and turns the bytes into plain records
// (nodeRec, entRec), checking what the bytes alone can say (lengths,
// ranges); it hands them over in batches on a channel. The builder, the
// one goroutine that builds the engine (but for the helpers below), takes
// them in order and checks
// the rest (repeats, entries naming nodes that are not there), so the
// first error found is the one the one-goroutine order finds, and so is
// the engine built. Once the parser has closed its channel the reader is
// the builder's again, for the sections after the entries.
//
// Two helpers take work off the builder where it does not need to wait
// for it: a goroutine makes the node slab's chunks ahead and maps their
// pages (load_ahead.go: a page fault a page of new memory was a fifth of
// a restart), and, once the last node is placed, another builds the inode
// index while the builder links the entries (the entries use the dense
// map, not the index; the builder waits for the index before the
// sections after the entries). Each owns what it writes: the chunks until
// the builder takes them, the index until it is done.
//
// The records in flight are bounded: loadBatches batches of at most
// loadBatch nodes or loadBatchEntries entries each.

const (
	loadBatch        = 4096
	loadBatchEntries = 1 << 16
	loadBatches      = 4
)

// nodeRec is one node as the checkpoint gives it.
type nodeRec struct {
	ino                   Ino
	mode, uid, gid, nlink uint32
	rdev                  uint32
	size                  uint64
	atime, mtime, ctime   int64
	xattrs                map[string][]byte
	target                string
	parent                Ino // directories
}

// entRec is a run of one directory's entries: all of them, or a part of
// a large directory's (first and last say which).
type entRec struct {
	dir         Ino
	count       uint64 // the directory's entries, in its first part
	first, last bool
	names       []byte // each name as its length (1 byte) and its bytes
	kids        []Ino
}

// size gives r room for the next left entries of its directory, up to a
// part's worth, guessing perName bytes a name (with its length byte), so
// that reading them grows nothing when the guess holds.
func (r *entRec) size(left uint64, perName int) {
	n := int(min(left, loadBatchEntries))
	r.kids = make([]Ino, 0, n)
	// An eighth more than the guess: names a little longer than the
	// last directory's would otherwise copy the whole part once.
	r.names = make([]byte, 0, n*max(perName, 2)+n*max(perName, 2)/8)
}

// loadBatchOf is what the parser hands over at a time: nodes or entries,
// and the error that ended the parse, if any.
type loadBatchOf struct {
	nodes []nodeRec
	ents  []entRec
	err   error
}

// readNode parses one node record.
func (d *decoder) readNode(r *nodeRec) {
	*r = nodeRec{}
	if !d.readFixed(r) {
		r.ino = Ino(d.uint())
		r.mode = d.uint32()
		r.uid, r.gid = d.uint32(), d.uint32()
		r.nlink = d.uint32()
		r.size = d.uint()
		r.atime = d.int()
		r.mtime = d.int()
		r.ctime = d.int()
		r.rdev = d.uint32()
	}
	if d.err != nil {
		return
	}
	if typ := r.mode & S_IFMT; r.rdev != 0 && typ != S_IFCHR && typ != S_IFBLK {
		d.err = fmt.Errorf("node %d: a device number on a node of type %o", r.ino, typ)
		return
	}
	if r.ino == 0 {
		d.err = fmt.Errorf("node 0")
		return
	}
	if nx := d.uint(); nx > 0 && d.err == nil {
		if nx > 1<<16 {
			d.err = fmt.Errorf("node %d: %d xattrs", r.ino, nx)
			return
		}
		xs := make(map[string][]byte, min(nx, 64))
		for range nx {
			k := d.str(MaxXattrName)
			v := d.str(MaxXattrSize)
			if d.err != nil {
				return
			}
			xs[k] = []byte(v)
		}
		r.xattrs = xs
	}
	switch r.mode & S_IFMT {
	case S_IFLNK:
		r.target = d.str(MaxPathLen)
	case S_IFDIR:
		r.parent = Ino(d.uint())
	}
}

// nodeFixedMax is the most bytes a node record's ten fixed fields (ino
// to rdev) can take: ten varints.
const nodeFixedMax = 10 * binary.MaxVarintLen64

// readFixed is the common case of readNode's fixed fields: the reader
// holds nodeFixedMax bytes, which are decoded in place and skipped at
// once, instead of a buffered read per field. It reports false, having
// read nothing, when they are not buffered or a field is malformed or
// out of range, so that the field-by-field path reads them again and
// fails with its own error.
func (d *decoder) readFixed(r *nodeRec) bool {
	if d.err != nil {
		return false
	}
	b, _ := d.r.Peek(nodeFixedMax)
	if len(b) < nodeFixedMax {
		return false
	}
	var u [10]uint64
	off := 0
	for i := range u {
		v, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return false
		}
		u[i], off = v, off+n
	}
	// mode, uid, gid, nlink and rdev are 32-bit.
	if max(u[1], u[2], u[3], u[4], u[9]) > 1<<32-1 {
		return false
	}
	r.ino, r.mode, r.uid, r.gid, r.nlink, r.size = Ino(u[0]), uint32(u[1]), uint32(u[2]), uint32(u[3]), uint32(u[4]), u[5]
	// The times are zigzag varints, as binary.Varint reads them.
	r.atime, r.mtime, r.ctime = unzigzag(u[6]), unzigzag(u[7]), unzigzag(u[8])
	r.rdev = uint32(u[9])
	d.r.Discard(off)
	return true
}

// unzigzag turns a zigzag-encoded varint into the signed value
// binary.Varint would return.
func unzigzag(ux uint64) int64 {
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

// buildNode adds the parsed node r to e; it reports whether r is a
// directory.
func (d *decoder) buildNode(e *Engine, r *nodeRec) (isDir bool) {
	// Repeats are refused as they come: left to Check, each would make
	// the next insert into the index walk a longer run.
	n, ok := d.add(e, r.ino)
	if d.err != nil {
		return
	}
	if !ok {
		d.err = fmt.Errorf("node %d repeated", r.ino)
		return
	}
	n.Mode, n.Nlink, n.Size = r.mode, r.nlink, r.size
	n.Atime, n.Mtime, n.Ctime = r.atime, r.mtime, r.ctime
	e.setOwner(n, r.uid, r.gid)
	if r.rdev != 0 {
		e.st.extra(n).rdev = r.rdev
	}
	if r.xattrs != nil {
		e.st.extra(n).xattrs = r.xattrs
	}
	switch n.Mode & S_IFMT {
	case S_IFLNK:
		e.st.extra(n).target = r.target
	case S_IFDIR:
		x := e.st.extra(n)
		x.parent = r.parent
		x.dir = &dirents{}
		return true
	}
	return false
}

// node reads one node into e, without a directory's entries (entries
// reads those); it reports whether the node is a directory.
func (d *decoder) node(e *Engine) (isDir bool) {
	var r nodeRec
	if d.readNode(&r); d.err != nil {
		return false
	}
	return d.buildNode(e, &r)
}

// readEntries parses the entries of one directory, calling put with each
// part of at most loadBatchEntries entries (one, empty, for a directory
// without entries), until put returns false.
func (d *decoder) readEntries(put func(*entRec) bool) {
	ino := Ino(d.uint())
	nc := d.uint()
	if d.err != nil {
		return
	}
	r := &entRec{dir: ino, count: nc, first: true}
	r.size(nc, d.nameGuess)
	for i := uint64(0); i < nc && d.err == nil; i++ {
		if !d.readEntry(r) && !d.readEntrySlow(ino, r) {
			break
		}
		if len(r.kids) == loadBatchEntries && i+1 < nc {
			d.nameGuess = len(r.names) / len(r.kids)
			if !put(r) {
				return
			}
			r = &entRec{dir: ino}
			r.size(nc-i-1, d.nameGuess)
		}
	}
	if len(r.kids) > 0 {
		d.nameGuess = len(r.names) / len(r.kids)
	}
	r.last = d.err == nil
	put(r)
}

// entryMax is the most bytes one entry of a directory's entries can take:
// the name's length, the name, the child's inode number.
const entryMax = binary.MaxVarintLen64 + MaxNameLen + binary.MaxVarintLen64

// readEntry is the common case of reading one entry into r: the whole
// entry is buffered, and is decoded in place and skipped at once. It
// reports false, having read nothing, when it is not buffered whole or is
// malformed, so that readEntrySlow reads it again and fails with its own
// error.
func (d *decoder) readEntry(r *entRec) bool {
	b, _ := d.r.Peek(entryMax)
	k, n := binary.Uvarint(b)
	if n <= 0 || k == 0 || k > MaxNameLen || uint64(len(b)-n) <= k {
		return false
	}
	name := b[n : n+int(k)]
	child, m := binary.Uvarint(b[n+int(k):])
	if m <= 0 {
		return false
	}
	r.names = append(r.names, byte(k))
	r.names = append(r.names, name...)
	r.kids = append(r.kids, Ino(child))
	d.r.Discard(n + int(k) + m)
	return true
}

// readEntrySlow reads one entry of directory ino into r field by field;
// it reports false, with d.err set, if the entry is malformed or cut.
func (d *decoder) readEntrySlow(ino Ino, r *entRec) bool {
	k := d.uint()
	if d.err == nil && (k == 0 || k > MaxNameLen) {
		d.err = fmt.Errorf("dir %d: entry name of %d bytes", ino, k)
	}
	if d.err != nil {
		return false
	}
	r.names = append(r.names, byte(k))
	r.names = append(r.names, make([]byte, k)...)
	if _, err := io.ReadFull(d.r, r.names[len(r.names)-int(k):]); err != nil {
		d.err = noEOF(err)
		r.names = r.names[:len(r.names)-int(k)-1]
		return false
	}
	child := Ino(d.uint())
	if d.err != nil {
		r.names = r.names[:len(r.names)-int(k)-1]
		return false
	}
	r.kids = append(r.kids, child)
	return true
}

// buildEntries links the parsed entries r into e.
func (d *decoder) buildEntries(e *Engine, r *entRec) {
	n := d.nodeOf(e, r.dir)
	if r.first && (n == nil || !n.isDir() || e.st.extraOf(n).dir.live > 0 || e.st.extraOf(n).dir.dead > 0) {
		d.err = fmt.Errorf("entries of %d: not a directory, or given twice", r.dir)
		return
	}
	dir := e.st.extraOf(n).dir
	if r.first && r.last {
		// The whole directory is in this part: its buffer takes exactly
		// the names and a 4-byte slot each, in one allocation of that
		// capacity (growing a slice would round it up to a size class,
		// which loaded then trims with a copy).
		dir.buf = make([]byte, 0, len(r.names)+4*len(r.kids))
	}
	names := r.names
	for _, child := range r.kids {
		k := int(names[0])
		name := names[1 : 1+k]
		names = names[1+k:]
		slot := d.slotOf(e, child)
		if slot == 0 {
			d.err = fmt.Errorf("dir %d: entry %q names node %d, which is not there", r.dir, name, child)
			return
		}
		dir.loadEntry(name, slot)
	}
	if r.last {
		if dup := dir.loaded(); dup != nil {
			d.err = fmt.Errorf("dir %d: entry %q repeated", r.dir, dup)
		}
	}
}

// entries reads one directory's entries into e, whose nodes are all
// read, building each part as it is parsed.
func (d *decoder) entries(e *Engine) {
	d.readEntries(func(r *entRec) bool {
		perr := d.err // a parse error ends the part; what it holds comes first
		d.err = nil
		d.buildEntries(e, r)
		if d.err == nil {
			d.err = perr
		}
		return d.err == nil
	})
}

// parseSections is the parser: it reads count nodes, the count of
// directories, and their entries, handing them to out in batches, and
// closes out when done (after a batch holding its error, if any) or when
// stop is closed.
func (d *decoder) parseSections(count uint64, out chan<- loadBatchOf, free <-chan []nodeRec, stop <-chan struct{}) {
	defer close(out)
	send := func(b loadBatchOf) bool {
		select {
		case out <- b:
			return true
		case <-stop:
			return false
		}
	}
	dirs := uint64(0)
	batch := make([]nodeRec, 0, loadBatch)
	for i := uint64(0); i < count; i++ {
		batch = batch[:len(batch)+1]
		r := &batch[len(batch)-1]
		if d.readNode(r); d.err != nil {
			send(loadBatchOf{nodes: batch[:len(batch)-1], err: d.err})
			return
		}
		if r.mode&S_IFMT == S_IFDIR {
			dirs++
		}
		if len(batch) == loadBatch {
			if !send(loadBatchOf{nodes: batch}) {
				return
			}
			select {
			case batch = <-free:
			default:
				batch = make([]nodeRec, 0, loadBatch)
			}
		}
	}
	if len(batch) > 0 && !send(loadBatchOf{nodes: batch}) {
		return
	}
	if nd := d.uint(); d.err == nil && nd != dirs {
		d.err = fmt.Errorf("entries of %d directories, %d read", nd, dirs)
	}
	if d.err != nil {
		send(loadBatchOf{err: d.err})
		return
	}
	var ents []entRec
	held := 0
	for range dirs {
		ok := true
		d.readEntries(func(r *entRec) bool {
			ents = append(ents, *r)
			held += len(r.kids) + 1
			if held >= loadBatchEntries {
				ok = send(loadBatchOf{ents: ents})
				ents, held = nil, 0
			}
			return ok
		})
		if !ok {
			return
		}
		if d.err != nil {
			send(loadBatchOf{ents: ents, err: d.err})
			return
		}
	}
	if len(ents) > 0 {
		send(loadBatchOf{ents: ents})
	}
}

// loadSections reads the node section and the entries of a checkpoint of
// count nodes into e, with holes the node slab's free slots, sorted: the
// parser on a goroutine of its own with a decoder of its own over d's
// reader, the builder on this one; d.err holds the first error.
func (d *decoder) loadSections(e *Engine, count uint64, holes []uint32) {
	if d.err != nil {
		return
	}
	p := &decoder{r: d.r}
	if count < 1<<32 {
		// The node slab's chunks, made ahead so that the builder does
		// not stop for their pages (load_ahead.go).
		e.st.nodes.ahead = startChunksAhead[node](int(count+uint64(len(holes)))/slabChunk + 1)
		defer func() {
			e.st.nodes.ahead.stop()
			e.st.nodes.ahead = nil
		}()
	}
	out := make(chan loadBatchOf, loadBatches)
	// Node batches the builder is done with go back to the parser, which
	// fills them again: the node section is then parsed into a few
	// batches' memory instead of fresh memory for every node.
	free := make(chan []nodeRec, loadBatches+1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.parseSections(count, out, free, stop)
	}()
	var perr error
	finished := false
	for b := range out {
		for i := range b.nodes {
			for len(holes) > 0 && holes[0] == max(e.st.nodes.next, 1) {
				e.st.nodes.skip()
				holes = holes[1:]
			}
			if d.buildNode(e, &b.nodes[i]); d.err != nil {
				break
			}
		}
		if len(b.nodes) == loadBatch {
			select {
			case free <- b.nodes[:0]:
			default:
			}
		}
		if d.err == nil && b.ents != nil {
			if !finished {
				// The inode index is built on another goroutine while
				// this one links the entries, which read the dense map
				// and the nodes but neither write a node's number nor
				// use the index; it is waited for below, before the
				// sections after the entries, which use it.
				d.skipHoles(e, holes)
				if d.dense != nil {
					wg.Add(1)
					go func() {
						defer wg.Done()
						e.st.indexAll()
					}()
				}
				finished = true
			}
			for i := range b.ents {
				if d.buildEntries(e, &b.ents[i]); d.err != nil {
					break
				}
			}
		}
		if d.err == nil && b.err != nil {
			perr = b.err
		}
		if d.err != nil || perr != nil {
			close(stop)
			for range out {
			}
			break
		}
	}
	wg.Wait()
	if d.err == nil && perr == nil && !finished {
		d.finishNodes(e, holes)
	}
	if d.err == nil {
		d.err = perr
	}
}

// finishNodes ends the node section: the holes after the last node, and
// the inode index once the dense map has placed the nodes.
func (d *decoder) finishNodes(e *Engine, holes []uint32) {
	d.skipHoles(e, holes)
	if d.dense != nil {
		e.st.indexAll()
	}
}

// skipHoles leaves the node slab's holes after the last node unused.
func (d *decoder) skipHoles(e *Engine, holes []uint32) {
	for len(holes) > 0 {
		e.st.nodes.skip()
		holes = holes[1:]
	}
}

// loadSectionsSerial is loadSections on the caller's goroutine alone.
func (d *decoder) loadSectionsSerial(e *Engine, count uint64, holes []uint32) {
	if d.err != nil {
		return
	}
	dirs := 0
	for i := uint64(0); i < count && d.err == nil; i++ {
		for len(holes) > 0 && holes[0] == max(e.st.nodes.next, 1) {
			e.st.nodes.skip()
			holes = holes[1:]
		}
		if d.node(e) {
			dirs++
		}
	}
	if d.err != nil {
		return
	}
	d.finishNodes(e, holes)
	if nd := d.uint(); d.err == nil && nd != uint64(dirs) {
		d.err = fmt.Errorf("entries of %d directories, %d read", nd, dirs)
		return
	}
	for range dirs {
		if d.entries(e); d.err != nil {
			break
		}
	}
}

// checkLoaded is Check for an engine Load has just built, which no other
// goroutine holds yet: the store's check runs on a goroutine of its own
// while this one walks the tree, both only reading; the error returned is
// the one Check would return.
func (e *Engine) checkLoaded() error {
	var storeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		storeErr = e.checkStoreOf(true)
	}()
	err := e.check(func() error { <-done; return storeErr })
	<-done
	return err
}
