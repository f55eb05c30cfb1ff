package server

import (
	"fmt"
	"syscall"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/protocol"
)

// inoFields are the request fields that name a node by inode number.
var inoFields = [...]protowire.Number{protocol.FieldIno, protocol.FieldNewParent}

// forwardInos resolves the inode fields of req through e's forwards
// (engine/forward.go) before it is applied, in the state machine, so
// that replay and every replica resolve alike: a number that is an alias
// of a local node is replaced by that node's in place; for a number whose
// node left, it returns where it went (the partition the first such
// field's went to, with every field whose node went there), which the
// caller answers if the call then fails for want of the node.
func forwardInos(e *engine.Engine, req proto.Message) *pb.Moved {
	if e.Forwards() == 0 {
		return nil
	}
	msg := req.ProtoReflect()
	fields := msg.Descriptor().Fields()
	var moved *pb.Moved
	for _, num := range inoFields {
		fd := fields.ByNumber(num)
		if fd == nil || fd.Kind() != protoreflect.Uint64Kind || fd.IsList() {
			continue
		}
		v := msg.Get(fd).Uint()
		if v == 0 {
			continue
		}
		to, as, gone := e.Forwarded(engine.Ino(v))
		switch {
		case !gone:
			if uint64(as) != v {
				msg.Set(fd, protoreflect.ValueOfUint64(uint64(as)))
			}
		case moved == nil:
			moved = &pb.Moved{Partition: uint32(to)}
			fallthrough
		case moved.Partition == uint32(to):
			if num == protocol.FieldIno {
				moved.Ino = uint64(as)
			} else {
				moved.NewParent = uint64(as)
			}
		}
	}
	return moved
}

// movedReply is the answer to a call that failed because a node it names
// by inode left this partition: ESTALE, saying where the node went.
func movedReply(m *pb.Moved) (uint32, proto.Message) {
	return uint32(syscall.ESTALE), &pb.ErrorDetail{
		Message: fmt.Sprintf("moved to partition %d", m.Partition), Moved: m}
}
