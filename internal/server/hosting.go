package server

import (
	"errors"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Hosting runs, in this process, replicas of partitions other than the
// one it was started for (internal/host): the HOST_START, HOST_STOP and
// HOST_LIST calls any server of the process receives go to it. Its
// methods may block (a replica opens or shuts down); each call runs on a
// goroutine of its own.
type Hosting interface {
	StartReplica(req *pb.HostStartRequest) (*pb.HostReplica, error)
	StopReplica(req *pb.HostStopRequest) error
	ListReplicas() *pb.HostListReply
}

// serveHosting answers a HOST_* call, on a goroutine of its own.
func serveHosting(h Hosting, c *rpc.Call, m pb.Method) {
	if h == nil {
		c.Reply(uint32(syscall.ENOSYS), nil)
		return
	}
	var reply proto.Message
	var err error
	switch m {
	case pb.Method_HOST_START:
		var req pb.HostStartRequest
		if proto.Unmarshal(c.Payload, &req) != nil {
			c.Reply(rpc.StatusMalformed, nil)
			return
		}
		reply, err = h.StartReplica(&req)
	case pb.Method_HOST_STOP:
		var req pb.HostStopRequest
		if proto.Unmarshal(c.Payload, &req) != nil {
			c.Reply(rpc.StatusMalformed, nil)
			return
		}
		err = h.StopReplica(&req)
	default:
		reply = h.ListReplicas()
	}
	if err != nil {
		status := uint32(syscall.EIO)
		var errno syscall.Errno
		if errors.As(err, &errno) {
			status = uint32(errno)
		}
		data, _ := proto.Marshal(&pb.ErrorDetail{Message: err.Error()})
		c.Reply(status, data)
		return
	}
	var data []byte
	if reply != nil {
		data, _ = proto.Marshal(reply)
	}
	c.Reply(0, data)
}
