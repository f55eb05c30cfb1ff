package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// checkpointMagic starts every checkpoint body; the last two bytes are the
// format version. Version 02 added the federation tables and version 03
// the data section (checkpoint_data.go), both after the nodes; version 04
// writes the nodes in slot order without their entries, then every
// directory's entries, so that Load links entries as it reads them.
const checkpointMagic = "CNPYNS04"

// ErrBadCheckpoint reports a checkpoint body that does not decode into a
// valid namespace.
var ErrBadCheckpoint = errors.New("bad checkpoint")

// WriteCheckpoint writes the whole namespace to w in a compact binary form
// that Load reads back. It runs on the owner goroutine and holds it for
// the time it takes to encode the tree.
func (e *Engine) WriteCheckpoint(w io.Writer) error {
	enc := encoder{w: w, buf: make([]byte, 0, encodeChunk+encodeSlack)}
	enc.raw([]byte(checkpointMagic))
	enc.uint(uint64(e.part))
	enc.uint(e.next)
	enc.uint(e.used)
	enc.uint(uint64(e.st.len()))
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
	enc.flush()
	if enc.err != nil {
		return fmt.Errorf("write checkpoint: %w", enc.err)
	}
	return nil
}

// Load reads a namespace written by WriteCheckpoint and verifies its
// invariants.
func Load(r io.Reader) (*Engine, error) {
	dec := decoder{r: bufio.NewReaderSize(r, 256<<10)}
	magic := dec.bytes(len(checkpointMagic))
	if dec.err == nil && string(magic) != checkpointMagic {
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
	dirs := 0
	for i := uint64(0); i < count && dec.err == nil; i++ {
		if dec.node(e) {
			dirs++
		}
	}
	if nd := dec.uint(); dec.err == nil && nd != uint64(dirs) {
		return nil, fmt.Errorf("%w: entries of %d directories, %d read", ErrBadCheckpoint, nd, dirs)
	}
	for range dirs {
		if dec.entries(e); dec.err != nil {
			break
		}
	}
	if dec.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, dec.err)
	}
	var err error
	if e.tables, err = dec.tables(e.part); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	dec.readData(e)
	if dec.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, dec.err)
	}
	if err := e.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheckpoint, err)
	}
	return e, nil
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
	e.uint(uint64(n.Ino))
	e.uint(uint64(n.Mode))
	e.uint(uint64(eng.uid(n)))
	e.uint(uint64(eng.gid(n)))
	e.uint(uint64(n.Nlink))
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
	for k, v := range x.xattrs {
		e.str(k)
		e.uint(uint64(len(v)))
		e.raw(v)
	}
	switch n.Mode & S_IFMT {
	case S_IFLNK:
		e.str(x.target)
	case S_IFDIR:
		e.uint(uint64(x.parent))
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
		e.uint(uint64(eng.at(slot).Ino))
		return true
	})
}

// decoder reads what encoder wrote, keeping the first error and bounding
// every length so that corrupt input cannot make it allocate without limit.
type decoder struct {
	r   *bufio.Reader
	err error
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
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

// node reads one node into e, without a directory's entries (entries
// reads those); it reports whether the node is a directory.
func (d *decoder) node(e *Engine) (isDir bool) {
	ino := Ino(d.uint())
	var a node
	a.Mode = d.uint32()
	uid, gid := d.uint32(), d.uint32()
	a.Nlink = d.uint32()
	a.Size = d.uint()
	a.Atime = d.int()
	a.Mtime = d.int()
	a.Ctime = d.int()
	rdev := d.uint32()
	if d.err != nil {
		return
	}
	if typ := a.Mode & S_IFMT; rdev != 0 && typ != S_IFCHR && typ != S_IFBLK {
		d.err = fmt.Errorf("node %d: a device number on a node of type %o", ino, typ)
		return
	}
	if ino == 0 {
		d.err = fmt.Errorf("node 0")
		return
	}
	// Repeats are refused as they come: left to Check, each would make
	// the next insert into the index walk a longer run.
	if e.st.slotOf(ino) != 0 {
		d.err = fmt.Errorf("node %d repeated", ino)
		return
	}
	_, n := e.st.add(ino)
	n.Mode, n.Nlink, n.Size = a.Mode, a.Nlink, a.Size
	n.Atime, n.Mtime, n.Ctime = a.Atime, a.Mtime, a.Ctime
	e.setOwner(n, uid, gid)
	if rdev != 0 {
		e.st.extra(n).rdev = rdev
	}
	if nx := d.uint(); nx > 0 && d.err == nil {
		if nx > 1<<16 {
			d.err = fmt.Errorf("node %d: %d xattrs", ino, nx)
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
		e.st.extra(n).xattrs = xs
	}
	switch n.Mode & S_IFMT {
	case S_IFLNK:
		if target := d.str(MaxPathLen); d.err == nil {
			e.st.extra(n).target = target
		}
	case S_IFDIR:
		x := e.st.extra(n)
		x.parent = Ino(d.uint())
		x.dir = &dirents{}
		return true
	}
	return false
}

// entries reads one directory's entries into e, whose nodes are all read.
func (d *decoder) entries(e *Engine) {
	ino := Ino(d.uint())
	nc := d.uint()
	if d.err != nil {
		return
	}
	n := e.st.get(ino)
	if n == nil || !n.isDir() || e.st.extraOf(n).dir.live > 0 || e.st.extraOf(n).dir.dead > 0 {
		d.err = fmt.Errorf("entries of %d: not a directory, or given twice", ino)
		return
	}
	dir := e.st.extraOf(n).dir
	var name [MaxNameLen]byte
	for i := uint64(0); i < nc && d.err == nil; i++ {
		k := d.uint()
		if d.err == nil && (k == 0 || k > MaxNameLen) {
			d.err = fmt.Errorf("dir %d: entry name of %d bytes", ino, k)
			return
		}
		if d.err != nil {
			return
		}
		if _, err := io.ReadFull(d.r, name[:k]); err != nil {
			d.err = noEOF(err)
			return
		}
		child := Ino(d.uint())
		slot := e.st.slotOf(child)
		if d.err == nil && slot == 0 {
			d.err = fmt.Errorf("dir %d: entry %q names node %d, which is not there", ino, name[:k], child)
			return
		}
		if dir.findBytes(name[:k]) >= 0 {
			d.err = fmt.Errorf("dir %d: entry %q repeated", ino, name[:k])
			return
		}
		dir.addBytes(name[:k], slot)
	}
}

// noEOF turns a clean EOF in the middle of a structure into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
