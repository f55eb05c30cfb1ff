package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// checkpointMagic starts every checkpoint body; the last two bytes are the
// format version. Version 02 added the data section (checkpoint_data.go)
// after the nodes.
const checkpointMagic = "CNPYNS02"

// ErrBadCheckpoint reports a checkpoint body that does not decode into a
// valid namespace.
var ErrBadCheckpoint = errors.New("bad checkpoint")

// WriteCheckpoint writes the whole namespace to w in a compact binary form
// that Load reads back. It runs on the owner goroutine and holds it for
// the time it takes to encode the tree.
func (e *Engine) WriteCheckpoint(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := encoder{w: bw}
	enc.raw([]byte(checkpointMagic))
	enc.uint(uint64(e.part))
	enc.uint(e.next)
	enc.uint(e.used)
	enc.uint(uint64(len(e.nodes)))
	for _, n := range e.nodes {
		enc.node(n)
	}
	enc.writeData(e)
	if enc.err != nil {
		return fmt.Errorf("write checkpoint: %w", enc.err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
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
	count := dec.uint()
	if dec.err == nil && part > 1<<PartitionBits-1 {
		return nil, fmt.Errorf("%w: partition %d", ErrBadCheckpoint, part)
	}
	e.nodes = make(map[Ino]*node, min(count, 1<<24))
	for i := uint64(0); i < count && dec.err == nil; i++ {
		n := dec.node()
		if dec.err != nil {
			break
		}
		if _, dup := e.nodes[n.attr.Ino]; dup {
			return nil, fmt.Errorf("%w: node %d twice", ErrBadCheckpoint, n.attr.Ino)
		}
		e.nodes[n.attr.Ino] = n
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

// encoder writes varints and strings, keeping the first error.
type encoder struct {
	w   *bufio.Writer
	buf [binary.MaxVarintLen64]byte
	err error
}

func (e *encoder) raw(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) uint(v uint64) { e.raw(e.buf[:binary.PutUvarint(e.buf[:], v)]) }
func (e *encoder) int(v int64)   { e.raw(e.buf[:binary.PutVarint(e.buf[:], v)]) }

func (e *encoder) str(s string) {
	e.uint(uint64(len(s)))
	if e.err == nil {
		_, e.err = e.w.WriteString(s)
	}
}

func (e *encoder) node(n *node) {
	a := &n.attr
	e.uint(uint64(a.Ino))
	e.uint(uint64(a.Mode))
	e.uint(uint64(a.UID))
	e.uint(uint64(a.GID))
	e.uint(uint64(a.Nlink))
	e.uint(a.Size)
	e.int(a.Atime)
	e.int(a.Mtime)
	e.int(a.Ctime)
	e.uint(uint64(a.Rdev))
	e.uint(uint64(len(n.xattrs)))
	for k, v := range n.xattrs {
		e.str(k)
		e.str(string(v))
	}
	switch a.Mode & S_IFMT {
	case S_IFLNK:
		e.str(n.target)
	case S_IFDIR:
		e.uint(uint64(n.parent))
		e.uint(uint64(len(n.children)))
		for name, ino := range n.children {
			e.str(name)
			e.uint(uint64(ino))
		}
	}
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

func (d *decoder) node() *node {
	n := &node{}
	a := &n.attr
	a.Ino = Ino(d.uint())
	a.Mode = d.uint32()
	a.UID = d.uint32()
	a.GID = d.uint32()
	a.Nlink = d.uint32()
	a.Size = d.uint()
	a.Atime = d.int()
	a.Mtime = d.int()
	a.Ctime = d.int()
	a.Rdev = d.uint32()
	if nx := d.uint(); nx > 0 && d.err == nil {
		n.xattrs = make(map[string][]byte, min(nx, 64))
		for range nx {
			k := d.str(MaxXattrName)
			v := d.str(MaxXattrSize)
			if d.err != nil {
				return nil
			}
			n.xattrs[k] = []byte(v)
		}
	}
	switch a.Mode & S_IFMT {
	case S_IFLNK:
		n.target = d.str(MaxPathLen)
	case S_IFDIR:
		n.parent = Ino(d.uint())
		nc := d.uint()
		n.children = make(map[string]Ino, min(nc, 1<<16))
		for i := uint64(0); i < nc && d.err == nil; i++ {
			name := d.str(MaxNameLen)
			n.children[name] = Ino(d.uint())
		}
	}
	return n
}

// noEOF turns a clean EOF in the middle of a structure into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
