package server

import (
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/rpc"
)

// isLockMethod reports whether m is one of the lock calls, which the RPC
// reader answers from the lock table without the apply loop: locks are
// not part of the logged namespace.
func isLockMethod(m pb.Method) bool { return m >= pb.Method_GETLK && m <= pb.Method_HEARTBEAT }

// serveLock answers a lock call on the RPC reader goroutine. A SETLKW
// that has to wait is held in the lock table, with no goroutine of its
// own, and answered when the lock is taken or the wait ends.
func (s *Server) serveLock(c *rpc.Call, m pb.Method) {
	if m == pb.Method_HEARTBEAT {
		var req pb.NodeRequest
		if err := proto.Unmarshal(c.Payload, &req); err != nil {
			c.Reply(rpc.StatusMalformed, nil)
			return
		}
		lost, held := s.locks.heartbeat(c.Client)
		data, _ := proto.Marshal(&pb.HeartbeatReply{
			TimeoutMs: uint32(s.locks.timeout / time.Millisecond), LocksLost: lost, Locks: uint32(held),
		})
		c.Reply(0, data)
		return
	}
	r, req, err := decodeLock(c.Client, c.Payload)
	if err != nil {
		c.Reply(rpc.StatusMalformed, nil)
		return
	}
	switch m {
	case pb.Method_GETLK:
		l, ok, err := s.locks.getlk(r)
		if err != nil {
			c.Reply(statusOf(err), nil)
			return
		}
		reply := &pb.LockReply{Type: lockUnlock}
		if ok {
			reply = &pb.LockReply{Type: l.typ, Start: l.start, End: l.end, Pid: l.pid}
		}
		data, _ := proto.Marshal(reply)
		c.Reply(0, data)
	case pb.Method_SETLK:
		c.Reply(statusOf(s.locks.setlk(r)), nil)
	case pb.Method_SETLKW:
		wait := time.Duration(req.WaitMs) * time.Millisecond
		s.locks.setlkw(r, req.Token, wait, func(status uint32) { c.Reply(status, nil) })
	case pb.Method_LOCK_CANCEL:
		s.locks.cancel(c.Client, req.Token)
		c.Reply(0, nil)
	}
}

// decodeLock decodes a lock call of client from the network. The request
// is checked when the lock table takes it (lockReq.check).
func decodeLock(client rpc.ClientID, payload []byte) (lockReq, *pb.LockRequest, error) {
	var req pb.LockRequest
	if err := proto.Unmarshal(payload, &req); err != nil {
		return lockReq{}, nil, err
	}
	return lockReq{
		ino: req.Ino, owner: lockOwner{client: client, owner: req.Owner}, typ: req.Type,
		start: req.Start, end: req.End, pid: req.Pid, flock: req.Flock,
	}, &req, nil
}

// expireLocks is the lock sweeper: it releases the locks of clients
// silent for longer than the timeout, until the server stops.
func (s *Server) expireLocks() {
	defer s.loops.Done()
	tick := time.NewTicker(max(s.locks.timeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.stopped:
			s.locks.stop()
			return
		case now := <-tick.C:
			if n := s.locks.expire(now); n > 0 {
				s.log.Info("locks of silent clients released", "clients", n, "timeout", s.locks.timeout)
			}
		}
	}
}
