package router

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// A node renamed to another partition keeps being reachable by the
// inode number it had (a mount's node id, a working directory): the
// partition it left answers a call naming that number ESTALE with a
// pb.Moved, and the router sends the call on to the partition named,
// with the number that partition knows (engine/forward.go). A node that
// moved on is followed hop by hop.

// maxMovedHops bounds the partitions one call is sent on to.
const maxMovedHops = 8

// movedOf returns the pb.Moved of an ESTALE reply, or nil.
func movedOf(reply []byte) *pb.Moved {
	var d pb.ErrorDetail
	if len(reply) == 0 || proto.Unmarshal(reply, &d) != nil || d.Moved == nil {
		return nil
	}
	if d.Moved.Ino == 0 && d.Moved.NewParent == 0 || d.Moved.Partition > 1<<16-1 {
		return nil
	}
	return d.Moved
}

// followable reports whether call rc may be sent on after a moved answer:
// it names its nodes by inode only (a path was resolved by this router's
// tables, and its rewritten bytes are gone), and it has not been sent on
// too often.
func followable(rc *reqCall) bool {
	if rc.hops >= maxMovedHops {
		return false
	}
	f, err := readFields(rc.payload())
	return err == nil && f.path == "" && f.newPath == ""
}

// followMoved sends call rc on to the partition mv names, with the inode
// fields mv gives set to its numbers (appended: the last value of a field
// is the one a decoder keeps). It runs on a goroutine of its own.
func (r *Router) followMoved(rc reqCall, mv *pb.Moved) {
	r.slow.Add(1)
	go func() {
		defer r.slow.Done()
		p := slices.Clip(rc.payload())
		for _, fv := range [...]struct {
			num protowire.Number
			v   uint64
		}{{fieldIno, mv.Ino}, {fieldNewParent, mv.NewParent}} {
			if fv.v != 0 {
				p = protowire.AppendTag(p, fv.num, protowire.VarintType)
				p = protowire.AppendVarint(p, fv.v)
			}
		}
		rc.moved, rc.hops = p, rc.hops+1
		rc.offReader = true
		r.forwardTo(&rc, r.view.Load(), uint16(mv.Partition), p, 0)
	}()
}

// payload returns the bytes rc is forwarded with: its own, or those of
// its last hop.
func (rc *reqCall) payload() []byte {
	if rc.moved != nil {
		return rc.moved
	}
	return rc.c.Payload
}
