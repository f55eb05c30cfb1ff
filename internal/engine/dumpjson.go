package engine

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/canopyfs/canopy/internal/mount"
)

// The JSON form of a checkpoint: one JSON object per line, one line per
// record of the binary form, in its order, so that either form converts
// to the other as a stream, holding one record at a time, and converting
// there and back gives the same bytes. Every line has a "t" field:
//
//	namespace   partition, inode allocator, bytes used, node count, free slots
//	node        one node: attributes, xattrs, symlink target or parent
//	dirs        the number of directories whose entries follow
//	dir         one directory's entries, as [name, inode] pairs
//	tables      the mount and routing tables
//	data        the slice allocator and the number of files with chunks
//	chunks      one file's chunks and their slices [id, size, off, len, pos]
//	garbage     the number of unused slices that follow
//	slice       one unused slice
//	quotas      the directory quotas' limits (quota_dump.go)
//	owner_quotas  the user and group quotas' limits, if any (quota_owner_checkpoint.go)
//	inline      the number of inline slices that follow, if any (inline_checkpoint.go)
//	inline_slice  one inline slice's id and bytes
//
// Names, targets and xattr values are JSON strings when they are valid
// UTF-8 and {"b64": "..."} otherwise.

// ErrBadJSONDump reports JSON lines that are not a checkpoint's.
var ErrBadJSONDump = errors.New("bad JSON dump")

// jbytes is a byte string in the JSON form.
type jbytes []byte

func (b jbytes) MarshalJSON() ([]byte, error) {
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(struct {
		B64 string `json:"b64"`
	}{base64.StdEncoding.EncodeToString(b)})
}

func (b *jbytes) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*b = jbytes(s)
		return nil
	}
	var v struct {
		B64 string `json:"b64"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	raw, err := base64.StdEncoding.DecodeString(v.B64)
	*b = raw
	return err
}

// jrec is every line's fields; each kind uses some.
type jrec struct {
	T string `json:"t"`

	// namespace
	Partition *uint64  `json:"partition,omitempty"`
	Next      uint64   `json:"next,omitempty"`
	Used      uint64   `json:"used,omitempty"`
	Nodes     uint64   `json:"nodes,omitempty"`
	Free      []uint64 `json:"free,omitempty"`

	// node
	Ino    uint64   `json:"ino,omitempty"`
	Mode   uint64   `json:"mode,omitempty"`
	UID    uint64   `json:"uid,omitempty"`
	GID    uint64   `json:"gid,omitempty"`
	Nlink  uint64   `json:"nlink,omitempty"`
	Size   uint64   `json:"size,omitempty"`
	Atime  int64    `json:"atime,omitempty"`
	Mtime  int64    `json:"mtime,omitempty"`
	Ctime  int64    `json:"ctime,omitempty"`
	Rdev   uint64   `json:"rdev,omitempty"`
	Xattrs []jxattr `json:"xattrs,omitempty"`
	Target *jbytes  `json:"target,omitempty"`
	Parent uint64   `json:"parent,omitempty"`

	// dirs, files, garbage
	Count uint64 `json:"count,omitempty"`
	// dir
	Entries []jentry `json:"entries,omitempty"`

	// tables
	Version uint64   `json:"version,omitempty"`
	Mounts  []jmount `json:"mounts,omitempty"`
	Routes  []jroute `json:"routes,omitempty"`

	// data
	NextSlice uint64     `json:"next_slice,omitempty"`
	Pending   []jpending `json:"pending,omitempty"`
	Files     uint64     `json:"files,omitempty"`
	// chunks
	Chunks []jchunk `json:"chunks,omitempty"`
	// slice
	ID    uint64 `json:"id,omitempty"`
	Freed int64  `json:"freed,omitempty"`
	// inline_slice
	Data jbytes `json:"data,omitempty"`

	// quotas
	Quotas []jquota `json:"quotas,omitempty"`
	// owner_quotas
	OwnerQuotas []jownerQuota `json:"owner_quotas,omitempty"`
}

type jxattr struct {
	Name  jbytes `json:"name"`
	Value jbytes `json:"value"`
}

// jentry is [name, inode].
type jentry struct {
	Name jbytes
	Ino  uint64
}

func (e jentry) MarshalJSON() ([]byte, error) { return json.Marshal([]any{e.Name, e.Ino}) }

func (e *jentry) UnmarshalJSON(data []byte) error {
	var v []json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if len(v) != 2 {
		return fmt.Errorf("entry of %d fields", len(v))
	}
	if err := json.Unmarshal(v[0], &e.Name); err != nil {
		return err
	}
	return json.Unmarshal(v[1], &e.Ino)
}

type jmount struct {
	Prefix   string `json:"prefix"`
	VPart    uint64 `json:"vpart"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

type jroute struct {
	VPart uint64   `json:"vpart"`
	Addrs []string `json:"addrs"`
}

type jpending struct {
	First uint64   `json:"first"`
	Count uint64   `json:"count"`
	Used  []uint64 `json:"used"`
}

type jchunk struct {
	Idx    uint64      `json:"idx"`
	Slices [][5]uint64 `json:"slices"`
}

// CheckpointToJSON converts a checkpoint body (WriteCheckpoint's output,
// version 06) read from r to its JSON form on w, one record at a time;
// records, if not nil, is called after every node with the nodes
// converted so far.
func CheckpointToJSON(r io.Reader, w io.Writer, records func(nodes uint64)) error {
	d := &decoder{r: bufio.NewReaderSize(r, 1<<20)}
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	var err error
	put := func(rec *jrec) {
		if err == nil && d.err == nil {
			err = enc.Encode(rec)
		}
	}
	magic := d.bytes(len(checkpointMagic))
	if d.err == nil && string(magic) != checkpointMagic {
		return fmt.Errorf("%w: magic %q", ErrBadCheckpoint, magic)
	}
	part := d.uint()
	head := jrec{T: "namespace", Partition: &part, Next: d.uint(), Used: d.uint(), Nodes: d.uint()}
	nfree := d.uint()
	if d.err == nil && nfree > head.Nodes+1<<32 {
		return fmt.Errorf("%w: %d free slots", ErrBadCheckpoint, nfree)
	}
	for i := uint64(0); i < nfree && d.err == nil; i++ {
		head.Free = append(head.Free, d.uint())
	}
	put(&head)
	// Nodes and directories, most of the lines, are written by hand
	// (dumpjson_fast.go), a line at a time into line.
	var line, scratch []byte
	putLine := func() {
		if err == nil && d.err == nil {
			_, err = bw.Write(line)
		}
	}
	for i := uint64(0); i < head.Nodes && d.err == nil && err == nil; i++ {
		line = d.jsonNodeLine(line[:0], &scratch)
		putLine()
		if records != nil && i%4096 == 4095 {
			records(i + 1)
		}
	}
	dirs := d.uint()
	put(&jrec{T: "dirs", Count: dirs})
	for i := uint64(0); i < dirs && d.err == nil && err == nil; i++ {
		var derr error
		if line, derr = d.jsonDirLine(line[:0], &scratch); derr != nil {
			return derr
		}
		putLine()
	}
	put(d.jsonTables())
	d.jsonData(put)
	d.jsonQuotas(put)
	d.jsonOwnerQuotas(put)
	d.jsonInline(put)
	if d.err != nil {
		return fmt.Errorf("%w: %w", ErrBadCheckpoint, d.err)
	}
	if err != nil {
		return fmt.Errorf("write JSON dump: %w", err)
	}
	if records != nil {
		records(head.Nodes)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write JSON dump: %w", err)
	}
	return nil
}

func (d *decoder) jsonTables() *jrec {
	rec := &jrec{T: "tables", Version: d.uint()}
	n := d.uint()
	if d.err == nil && n > MaxMountEntries {
		d.err = fmt.Errorf("%d mount entries", n)
	}
	for range n {
		if d.err != nil {
			break
		}
		rec.Mounts = append(rec.Mounts, jmount{Prefix: d.str(mount.MaxPathLen), VPart: d.uint(), Target: d.str(mount.MaxPathLen), ReadOnly: d.uint() == 1})
	}
	groups := d.uint()
	if d.err == nil && groups > mount.VirtualPartitions {
		d.err = fmt.Errorf("%d routes", groups)
	}
	for range groups {
		if d.err != nil {
			break
		}
		r := jroute{VPart: d.uint()}
		na := d.uint()
		if d.err == nil && na > MaxGroupAddrs {
			d.err = fmt.Errorf("route with %d addresses", na)
		}
		for range na {
			r.Addrs = append(r.Addrs, d.str(MaxAddrLen))
		}
		rec.Routes = append(rec.Routes, r)
	}
	return rec
}

func (d *decoder) jsonData(put func(*jrec)) {
	rec := &jrec{T: "data", NextSlice: d.uint()}
	np := d.uint()
	if d.err == nil && np > maxPendingBatches {
		d.err = fmt.Errorf("%d pending slice batches", np)
	}
	for range np {
		if d.err != nil {
			return
		}
		p := jpending{First: d.uint(), Count: d.uint()}
		if d.err == nil && (p.Count == 0 || p.Count > MaxAllocSlices) {
			d.err = fmt.Errorf("slice batch of %d", p.Count)
			return
		}
		for range (p.Count + 63) / 64 {
			p.Used = append(p.Used, d.uint())
		}
		rec.Pending = append(rec.Pending, p)
	}
	rec.Files = d.uint()
	put(rec)
	for i := uint64(0); i < rec.Files && d.err == nil; i++ {
		c := &jrec{T: "chunks", Ino: d.uint()}
		nc := d.uint()
		if d.err == nil && nc > maxCkptChunks {
			d.err = fmt.Errorf("node %d: %d chunks", c.Ino, nc)
			return
		}
		for range nc {
			if d.err != nil {
				return
			}
			ch := jchunk{Idx: d.uint()}
			ns := d.uint()
			if d.err == nil && ns > maxCkptSlices {
				d.err = fmt.Errorf("node %d: %d slices in a chunk", c.Ino, ns)
				return
			}
			for range ns {
				ch.Slices = append(ch.Slices, [5]uint64{d.uint(), d.uint(), d.uint(), d.uint(), d.uint()})
			}
			c.Chunks = append(c.Chunks, ch)
		}
		put(c)
	}
	ng := d.uint()
	put(&jrec{T: "garbage", Count: ng})
	prev := uint64(0)
	for i := uint64(0); i < ng && d.err == nil; i++ {
		id := prev + d.uint()
		put(&jrec{T: "slice", ID: id, Size: d.uint(), Freed: d.int()})
		prev = id
	}
}

// JSONToCheckpoint converts the JSON form read from r back to the
// checkpoint body on w, one record at a time. It checks the records'
// kinds, order and counts; what they say is checked by Load.
func JSONToCheckpoint(r io.Reader, w io.Writer, records func(nodes uint64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	line := 0
	// hot is the record nodes and directories are read into, one after
	// the other (decodeHot): what it holds is valid until the next line.
	var hot jrec
	next := func(kind string) (*jrec, error) {
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return nil, fmt.Errorf("read JSON dump: %w", err)
			}
			return nil, fmt.Errorf("%w: ends at line %d, expected a %q record", ErrBadJSONDump, line, kind)
		}
		line++
		var rec *jrec
		var err error
		if kind == "node" || kind == "dir" {
			rec = &hot
			err = decodeHot(sc.Bytes(), rec)
		} else {
			rec = &jrec{}
			err = json.Unmarshal(sc.Bytes(), rec)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrBadJSONDump, line, err)
		}
		if rec.T != kind {
			return nil, fmt.Errorf("%w: line %d: a %q record, expected %q", ErrBadJSONDump, line, rec.T, kind)
		}
		return rec, nil
	}
	e := &encoder{w: w, buf: make([]byte, 0, encodeChunk+encodeSlack)}
	head, err := next("namespace")
	if err != nil {
		return err
	}
	if head.Partition == nil {
		return fmt.Errorf("%w: line 1: no partition", ErrBadJSONDump)
	}
	e.raw([]byte(checkpointMagic))
	for _, v := range []uint64{*head.Partition, head.Next, head.Used, head.Nodes, uint64(len(head.Free))} {
		e.uint(v)
	}
	for _, v := range head.Free {
		e.uint(v)
	}
	for i := uint64(0); i < head.Nodes; i++ {
		n, err := next("node")
		if err != nil {
			return err
		}
		for _, v := range []uint64{n.Ino, n.Mode, n.UID, n.GID, n.Nlink, n.Size} {
			e.uint(v)
		}
		e.int(n.Atime)
		e.int(n.Mtime)
		e.int(n.Ctime)
		e.uint(n.Rdev)
		e.uint(uint64(len(n.Xattrs)))
		for _, x := range n.Xattrs {
			e.bytes(x.Name)
			e.bytes(x.Value)
		}
		switch uint32(n.Mode) & S_IFMT {
		case S_IFLNK:
			if n.Target == nil {
				return fmt.Errorf("%w: line %d: symlink %d without a target", ErrBadJSONDump, line, n.Ino)
			}
			e.bytes(*n.Target)
		case S_IFDIR:
			e.uint(n.Parent)
		}
		if records != nil && i%4096 == 4095 {
			records(i + 1)
		}
		if e.err != nil {
			return fmt.Errorf("write checkpoint: %w", e.err)
		}
	}
	dirs, err := next("dirs")
	if err != nil {
		return err
	}
	e.uint(dirs.Count)
	for range dirs.Count {
		d, err := next("dir")
		if err != nil {
			return err
		}
		e.uint(d.Ino)
		e.uint(uint64(len(d.Entries)))
		for _, ent := range d.Entries {
			e.bytes(ent.Name)
			e.uint(ent.Ino)
		}
	}
	t, err := next("tables")
	if err != nil {
		return err
	}
	e.uint(t.Version)
	e.uint(uint64(len(t.Mounts)))
	for _, m := range t.Mounts {
		e.str(m.Prefix)
		e.uint(m.VPart)
		e.str(m.Target)
		ro := uint64(0)
		if m.ReadOnly {
			ro = 1
		}
		e.uint(ro)
	}
	e.uint(uint64(len(t.Routes)))
	for _, r := range t.Routes {
		e.uint(r.VPart)
		e.uint(uint64(len(r.Addrs)))
		for _, a := range r.Addrs {
			e.str(a)
		}
	}
	data, err := next("data")
	if err != nil {
		return err
	}
	e.uint(data.NextSlice)
	e.uint(uint64(len(data.Pending)))
	for _, p := range data.Pending {
		if uint64(len(p.Used)) != (p.Count+63)/64 {
			return fmt.Errorf("%w: line %d: slice batch of %d with %d words", ErrBadJSONDump, line, p.Count, len(p.Used))
		}
		e.uint(p.First)
		e.uint(p.Count)
		for _, u := range p.Used {
			e.uint(u)
		}
	}
	e.uint(data.Files)
	for range data.Files {
		c, err := next("chunks")
		if err != nil {
			return err
		}
		e.uint(c.Ino)
		e.uint(uint64(len(c.Chunks)))
		for _, ch := range c.Chunks {
			e.uint(ch.Idx)
			e.uint(uint64(len(ch.Slices)))
			for _, s := range ch.Slices {
				for _, v := range s {
					e.uint(v)
				}
			}
		}
	}
	g, err := next("garbage")
	if err != nil {
		return err
	}
	e.uint(g.Count)
	prev := uint64(0)
	for range g.Count {
		s, err := next("slice")
		if err != nil {
			return err
		}
		if s.ID <= prev && prev != 0 || s.ID == 0 {
			return fmt.Errorf("%w: line %d: unused slice %d after %d", ErrBadJSONDump, line, s.ID, prev)
		}
		e.uint(s.ID - prev)
		e.uint(s.Size)
		e.int(s.Freed)
		prev = s.ID
	}
	if err := jsonQuotasToCheckpoint(next, e); err != nil {
		return err
	}
	// The optional sections, each at most once and in this order.
	optional := []string{"owner_quotas", "inline"}
	for sc.Scan() {
		line++
		rec := &jrec{}
		if err := json.Unmarshal(sc.Bytes(), rec); err != nil {
			return fmt.Errorf("%w: line %d: %w", ErrBadJSONDump, line, err)
		}
		for len(optional) > 0 && optional[0] != rec.T {
			optional = optional[1:]
		}
		if len(optional) == 0 {
			return fmt.Errorf("%w: line %d: a %q record after the quotas", ErrBadJSONDump, line, rec.T)
		}
		optional = optional[1:]
		var err error
		if rec.T == "inline" {
			err = jsonInlineToCheckpoint(rec, next, e)
		} else {
			err = jsonOwnerQuotasToCheckpoint(rec, e)
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read JSON dump: %w", err)
	}
	e.flush()
	if e.err != nil {
		return fmt.Errorf("write checkpoint: %w", e.err)
	}
	if records != nil {
		records(head.Nodes)
	}
	return nil
}
