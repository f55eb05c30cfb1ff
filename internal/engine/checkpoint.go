package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
)

// checkpointMagic starts every checkpoint body; the last two bytes are the
// format version. Version 02 added the federation tables and version 03
// the data section (checkpoint_data.go), both after the nodes; version 04
// writes the nodes in slot order without their entries, then every
// directory's entries, so that Load links entries as it reads them;
// version 05 adds the node slab's free slots, in the order they will be
// reused, before the nodes, so that a loaded engine lays out new nodes as
// the engine that wrote it would have, and two replicas that applied the
// same operations write the same bytes whether or not one of them was
// loaded from a checkpoint in between; version 06 adds the directory
// quotas' limits after the data section (quota_checkpoint.go), and, as
// optional last sections, the user and group quotas' limits
// (quota_owner_checkpoint.go), the bytes of inline slices
// (inline_checkpoint.go) and the intents of renames across partitions
// (xrename_checkpoint.go). Load reads versions 04, 05 and 06.
const (
	checkpointMagic   = "CNPYNS06"
	checkpointMagic05 = "CNPYNS05"
	checkpointMagic04 = "CNPYNS04"
)

// ErrBadCheckpoint reports a checkpoint body that does not decode into a
// valid namespace.
var ErrBadCheckpoint = errors.New("bad checkpoint")

// WriteCheckpoint writes the whole namespace to w in a compact binary form
// that Load reads back. It runs on the owner goroutine and holds it for
// the time it takes to encode the tree; Freeze and Frozen.WriteCheckpoint
// write the same bytes without holding it.
func (e *Engine) WriteCheckpoint(w io.Writer) error {
	e.st.beginRO() // read what is packed where it is
	defer e.st.endRO()
	enc := encoder{w: w, buf: make([]byte, 0, encodeChunk+encodeSlack)}
	enc.raw([]byte(checkpointMagic))
	enc.uint(uint64(e.part))
	enc.uint(e.next)
	enc.uint(e.used)
	enc.uint(uint64(e.st.len()))
	free := e.st.nodes.free
	enc.uint(uint64(len(free)))
	for _, slot := range free {
		enc.uint(uint64(slot))
	}
	dirs := 0
	for _, n := range e.st.all() {
		enc.node(e, n)
		if n.isDir() {
			dirs++
		}
	}
	enc.uint(uint64(dirs))
	for _, n := range e.st.all() {
		if n.isDir() {
			enc.entries(e, n)
		}
	}
	enc.tables(&e.tables)
	enc.writeData(e)
	enc.quotas(e.quota.list)
	enc.ownerQuotas(e.oq.list)
	enc.inline(e.inl.data, e.inl.sent)
	enc.intents(e.xr.list)
	enc.forwards(&e.fwd)
	enc.flush()
	if enc.err != nil {
		return fmt.Errorf("write checkpoint: %w", enc.err)
	}
	return nil
}

// Load reads a namespace written by WriteCheckpoint and verifies its
// invariants.
func Load(r io.Reader) (*Engine, error) { return load(r, true) }

// load is Load, decoding on a goroutine of its own if parallel
// (load_parallel.go), or all on the caller's.
func load(r io.Reader, parallel bool) (*Engine, error) {
	dec := decoder{r: bufio.NewReaderSize(r, 256<<10)}
	magic := dec.bytes(len(checkpointMagic))
	if dec.err == nil && string(magic) != checkpointMagic && string(magic) != checkpointMagic05 && string(magic) != checkpointMagic04 {
		return nil, fmt.Errorf("%w: magic %q", ErrBadCheckpoint, magic)
	}
	part := dec.uint()
	e := &Engine{part: uint16(part), root: RootIno(uint16(part))}
	e.next = dec.uint()
	e.used = dec.uint()
	if dec.err == nil && (e.next < 2 || e.next > 1<<localBits) {
		return nil, fmt.Errorf("%w: inode allocator at %d", ErrBadCheckpoint, e.next)
	}
	count := dec.uint()
	if dec.err == nil && part > 1<<PartitionBits-1 {
		return nil, fmt.Errorf("%w: partition %d", ErrBadCheckpoint, part)
	}
	var free []uint32
	if string(magic) != checkpointMagic04 {
		free = dec.freeSlots(count)
	}
	if dec.err == nil && count < 1<<32 {
		// Sized ahead by the header's count, which a damaged checkpoint
		// may make as large as it likes: within maxReserve (the index
		// grows beyond it as nodes are read).
		e.st.index.reserve(int(min(count, maxReserve)))
		dec.denseFor(e, min(count, maxReserve))
	}
	holes := slices.Sorted(slices.Values(free))
	if slot, dup := repeated(holes); dup {
		return nil, fmt.Errorf("%w: free slot %d repeated", ErrBadCheckpoint, slot)
	}
	if parallel {
		dec.loadSections(e, count, holes)
	} else {
		dec.loadSectionsSerial(e, count, holes)
	}
	e.st.nodes.free = free
	dec.dense = nil
	if dec.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, dec.err)
	}
	var err error
	if e.tables, err = dec.tables(e.part); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	dec.readData(e)
	if string(magic) == checkpointMagic {
		dec.readQuotas(e)
		dec.readOwnerQuotas(e)
		dec.readInline(e)
		dec.readSections(e)
	}
	if dec.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, dec.err)
	}
	check := e.Check
	if parallel {
		check = e.checkLoaded
	}
	if err := check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	return e, nil
}

// freeSlots reads the node slab's free list of a checkpoint holding count
// nodes: distinct slots from 1 to count plus their own number, as a slab
// of count live records and that many holes has.
func (d *decoder) freeSlots(count uint64) []uint32 {
	n := d.uint()
	if d.err != nil {
		return nil
	}
	if count+n > math.MaxUint32-1 {
		d.err = fmt.Errorf("%d nodes and %d free slots", count, n)
		return nil
	}
	var free []uint32
	for range n {
		slot := d.uint()
		if d.err != nil {
			return nil
		}
		if slot == 0 || slot > count+n {
			d.err = fmt.Errorf("free slot %d of a slab of %d", slot, count+n)
			return nil
		}
		free = append(free, uint32(slot))
	}
	return free
}

// repeated reports the first value repeated in sorted, if any.
func repeated(sorted []uint32) (uint32, bool) {
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return sorted[i], true
		}
	}
	return 0, false
}

// encoder writes varints and strings, keeping the first error. It appends
// to buf and hands w a chunk at a time, so that a field costs an append,
// not a call through a writer.
type encoder struct {
	w   io.Writer
	buf []byte
	err error
}

// encodeChunk is the most bytes buf gathers before they go to w;
// encodeSlack is room for the longest single field beyond it.
const (
	encodeChunk = 1 << 20
	encodeSlack = 2*binary.MaxVarintLen64 + MaxXattrSize
)

func (e *encoder) flush() {
	if e.err == nil && len(e.buf) > 0 {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
}

func (e *encoder) spill() {
	if len(e.buf) >= encodeChunk {
		e.flush()
	}
}

func (e *encoder) raw(b []byte) {
	e.buf = append(e.buf, b...)
	e.spill()
}

func (e *encoder) uint(v uint64) {
	e.buf = binary.AppendUvarint(e.buf, v)
	e.spill()
}

func (e *encoder) int(v int64) {
	e.buf = binary.AppendVarint(e.buf, v)
	e.spill()
}

func (e *encoder) str(s string) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
	e.buf = append(e.buf, s...)
	e.spill()
}

func (e *encoder) node(eng *Engine, n *node) {
	var parent Ino
	if n.isDir() {
		parent = eng.st.extraOf(n).parent
	}
	e.nodeAs(eng, n, n.Ino, n.Nlink, parent)
}

// nodeAs writes node n as node ino with nlink links and, for a directory,
// parent as its parent (a subtree's dump renumbers its top, subtree.go).
func (e *encoder) nodeAs(eng *Engine, n *node, ino Ino, nlink uint32, parent Ino) {
	e.uint(uint64(ino))
	e.uint(uint64(n.Mode))
	e.uint(uint64(eng.uid(n)))
	e.uint(uint64(eng.gid(n)))
	e.uint(uint64(nlink))
	e.uint(n.Size)
	e.int(n.Atime)
	e.int(n.Mtime)
	e.int(n.Ctime)
	e.uint(uint64(eng.rdev(n)))
	x := eng.st.extraOf(n)
	if x == nil {
		x = &noExtra
	}
	e.uint(uint64(len(x.xattrs)))
	if len(x.xattrs) > 0 {
		// In name order: map order would differ from one checkpoint to
		// the next.
		for _, k := range slices.Sorted(maps.Keys(x.xattrs)) {
			v := x.xattrs[k]
			e.str(k)
			e.uint(uint64(len(v)))
			e.raw(v)
		}
	}
	switch n.Mode & S_IFMT {
	case S_IFLNK:
		e.str(x.target)
	case S_IFDIR:
		e.uint(uint64(parent))
	}
}

// noExtra stands for the extra record of a node that has none.
var noExtra extra

// entries writes directory n's entries: its inode number, then each name
// with the inode number it names.
func (e *encoder) entries(eng *Engine, n *node) {
	d := eng.st.extraOf(n).dir
	e.uint(uint64(n.Ino))
	e.uint(uint64(d.live))
	d.each(func(name []byte, slot uint32) bool {
		e.uint(uint64(len(name)))
		e.raw(name)
		e.uint(uint64(eng.st.inoAt(slot)))
		return true
	})
}

// decoder reads what encoder wrote, keeping the first error and bounding
// every length so that corrupt input cannot make it allocate without limit.
type decoder struct {
	r   *bufio.Reader
	err error
	// dense, while Load reads the nodes and entries of a checkpoint whose
	// inode numbers are dense enough, maps a local inode number to its
	// slot (load.go); nil: the inode index does.
	dense []uint32
	// nameGuess is the bytes a name (with its length byte) of the last
	// directory read took, for sizing the next one's (load_parallel.go).
	nameGuess int
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	// The common case: the whole varint is buffered.
	if b, _ := d.r.Peek(binary.MaxVarintLen64); len(b) > 0 {
		if v, n := binary.Uvarint(b); n > 0 {
			d.r.Discard(n)
			return v
		}
	}
	v, err := binary.ReadUvarint(d.r)
	if err != nil {
		d.err = noEOF(err)
	}
	return v
}

func (d *decoder) uint32() uint32 {
	v := d.uint()
	if v > 1<<32-1 && d.err == nil {
		d.err = fmt.Errorf("value %d out of range", v)
	}
	return uint32(v)
}

func (d *decoder) int() int64 {
	if d.err != nil {
		return 0
	}
	if b, _ := d.r.Peek(binary.MaxVarintLen64); len(b) > 0 {
		if v, n := binary.Varint(b); n > 0 {
			d.r.Discard(n)
			return v
		}
	}
	v, err := binary.ReadVarint(d.r)
	if err != nil {
		d.err = noEOF(err)
	}
	return v
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.err = noEOF(err)
		return nil
	}
	return b
}

func (d *decoder) str(limit int) string {
	n := d.uint()
	if d.err == nil && n > uint64(limit) {
		d.err = fmt.Errorf("string of %d bytes, limit %d", n, limit)
	}
	return string(d.bytes(int(n)))
}

// noEOF turns a clean EOF in the middle of a structure into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
