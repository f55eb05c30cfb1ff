package data

import (
	"fmt"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// piece is a run of a chunk's bytes that comes from one place: n bytes at
// chunk offset pos, read from byte soff of slice id (size bytes stored),
// or zeros when id is 0.
type piece struct {
	pos, n int
	id     uint64
	size   int
	soff   int
}

// checkView rejects a chunk view that a reader cannot trust: slices out of
// order or overlapping, running past the chunk, or naming bytes their slice
// does not have. Views come from the network.
func checkView(v *pb.ChunkView, chunkSize int) error {
	end := 0
	for i, s := range v.Slices {
		pos, ln := int(s.Pos), int(s.Len)
		switch {
		case pos < end:
			return fmt.Errorf("chunk %d: slice %d at %d overlaps the one before (ends at %d)", v.Chunk, i, pos, end)
		case pos+ln > chunkSize:
			return fmt.Errorf("chunk %d: slice %d runs past the chunk (%d+%d > %d)", v.Chunk, i, pos, ln, chunkSize)
		case s.Id != 0 && int(s.Off)+ln > int(s.Size):
			return fmt.Errorf("chunk %d: slice %d reads %d+%d of slice %d, which has %d bytes", v.Chunk, i, s.Off, ln, s.Id, s.Size)
		}
		end = pos + ln
	}
	return nil
}

// plan splits bytes [off, off+n) of a chunk whose view is slices (checked
// by checkView) into pieces, in order, appended to out. Bytes no slice
// covers are holes.
func plan(out []piece, slices []*pb.Slice, off, n int) []piece {
	end := off + n
	at := off
	for _, s := range slices {
		sp, se := int(s.Pos), int(s.Pos)+int(s.Len)
		if se <= at {
			continue
		}
		if sp >= end {
			break
		}
		if sp > at {
			out = append(out, piece{pos: at, n: sp - at})
			at = sp
		}
		stop := min(se, end)
		p := piece{pos: at, n: stop - at}
		if s.Id != 0 {
			p.id, p.size, p.soff = s.Id, int(s.Size), int(s.Off)+at-sp
		}
		out = append(out, p)
		at = stop
	}
	if at < end {
		out = append(out, piece{pos: at, n: end - at})
	}
	return out
}

// sliceOf is the whole of slice id, n bytes long, placed at pos.
func sliceOf(id uint64, pos, n int) *pb.Slice {
	return &pb.Slice{Id: id, Size: uint32(n), Len: uint32(n), Pos: uint32(pos)}
}
