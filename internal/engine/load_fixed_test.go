package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// TestReadFixedMatchesFieldByField decodes node records whose fixed
// fields take random values (times negative, 32-bit fields out of range,
// ino 0) with readNode, once through a reader large enough for readFixed
// and once through one so small that every record takes the
// field-by-field path: the same records and the same errors, and the
// reader left at the same place.
func TestReadFixedMatchesFieldByField(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pick := func(bits uint) uint64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return rng.Uint64() >> (64 - bits)
		case 2:
			return math.MaxUint64 >> rng.IntN(64)
		}
		return rng.Uint64N(300)
	}
	for i := range 2000 {
		var b []byte
		for range 1 + rng.IntN(3) {
			u := []uint64{pick(48), pick(17) | 0o100000, pick(32), pick(32), pick(32), pick(64)}
			if rng.IntN(20) == 0 {
				u[1+rng.IntN(4)] = 1<<32 + pick(20) // out of range
			}
			for _, v := range u {
				b = binary.AppendUvarint(b, v)
			}
			for range 3 {
				b = binary.AppendVarint(b, int64(pick(64)))
			}
			b = binary.AppendUvarint(b, pick(33)) // rdev
			b = binary.AppendUvarint(b, 0)        // no xattrs
		}
		if rng.IntN(5) == 0 {
			b = b[:rng.IntN(len(b))] // cut short
		}
		// bufio's smallest buffer is 16 bytes, under nodeFixedMax.
		fast := &decoder{r: bufio.NewReaderSize(bytes.NewReader(b), 4096)}
		slow := &decoder{r: bufio.NewReaderSize(bytes.NewReader(b), 16)}
		for {
			var rf, rs nodeRec
			fast.readNode(&rf)
			slow.readNode(&rs)
			if (fast.err == nil) != (slow.err == nil) || fast.err != nil && fast.err.Error() != slow.err.Error() {
				t.Fatalf("case %d: errors %v and %v", i, fast.err, slow.err)
			}
			if fast.err != nil {
				break
			}
			if rf.ino != rs.ino || rf.mode != rs.mode || rf.uid != rs.uid || rf.gid != rs.gid || rf.nlink != rs.nlink ||
				rf.size != rs.size || rf.atime != rs.atime || rf.mtime != rs.mtime || rf.ctime != rs.ctime || rf.rdev != rs.rdev {
				t.Fatalf("case %d: %+v and %+v", i, rf, rs)
			}
			_, ef := fast.r.Peek(1)
			_, es := slow.r.Peek(1)
			if (ef == nil) != (es == nil) {
				t.Fatalf("case %d: readers left at different places", i)
			}
			if ef != nil {
				break
			}
		}
	}
}

// TestReadEntryMatchesFieldByField reads directories' entries (names of
// random lengths, some of them 0 or over MaxNameLen, child numbers up to
// 64 bits, cut short at random) through a reader that holds whole
// entries and through one so small that most take the field-by-field
// path: the same names, children and errors.
func TestReadEntryMatchesFieldByField(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	type parsed struct {
		names []byte
		kids  []Ino
		err   string
	}
	read := func(b []byte, size int) parsed {
		d := &decoder{r: bufio.NewReaderSize(bytes.NewReader(b), size)}
		var p parsed
		d.readEntries(func(r *entRec) bool {
			p.names = append(p.names, r.names...)
			p.kids = append(p.kids, r.kids...)
			return true
		})
		if d.err != nil {
			p.err = d.err.Error()
		}
		return p
	}
	for i := range 3000 {
		n := 1 + rng.IntN(40)
		b := binary.AppendUvarint(nil, 77)     // the directory
		b = binary.AppendUvarint(b, uint64(n)) // its entries
		for range n {
			k := 1 + rng.IntN(MaxNameLen)
			if rng.IntN(200) == 0 {
				k = []int{0, MaxNameLen + 1, 1 << 20}[rng.IntN(3)]
			}
			b = binary.AppendUvarint(b, uint64(k))
			for range min(k, MaxNameLen+1) {
				b = append(b, byte('a'+rng.IntN(26)))
			}
			b = binary.AppendUvarint(b, rng.Uint64()>>rng.IntN(64))
		}
		if rng.IntN(4) == 0 {
			b = b[:rng.IntN(len(b))]
		}
		fast, slow := read(b, 4096), read(b, 16)
		if fast.err != slow.err || !bytes.Equal(fast.names, slow.names) || len(fast.kids) != len(slow.kids) {
			t.Fatalf("case %d: %q / %q, %d / %d names bytes, %d / %d children", i, fast.err, slow.err,
				len(fast.names), len(slow.names), len(fast.kids), len(slow.kids))
		}
		for j := range fast.kids {
			if fast.kids[j] != slow.kids[j] {
				t.Fatalf("case %d: child %d is %d / %d", i, j, fast.kids[j], slow.kids[j])
			}
		}
	}
}
