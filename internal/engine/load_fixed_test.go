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
