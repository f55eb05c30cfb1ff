package server

import (
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/locks"
	"github.com/canopyfs/canopy/internal/rpc"
)

// File locks are kept by the lock manager (internal/locks), outside the
// logged namespace; this file is its RPC glue.

// LockEOF is the last byte of a lock that runs to the end of the file
// (the kernel's OFFSET_MAX).
const LockEOF = locks.EOF

// DefaultLockTimeout is how long a client holding locks may stay silent
// (no lock call, no heartbeat) before it loses them.
const DefaultLockTimeout = locks.DefaultTimeout

// serveLock answers a lock call (classLock) on the RPC reader goroutine,
// from the lock table and without the apply stage: locks are not part of
// the logged namespace. A SETLKW
// that has to wait is held in the lock table, with no goroutine of its
// own, and answered when the lock is taken or the wait ends.
func serveLock(t *locks.Table, c *rpc.Call, m pb.Method) {
	if m == pb.Method_HEARTBEAT {
		var req pb.NodeRequest
		if err := proto.Unmarshal(c.Payload, &req); err != nil {
			c.Reply(rpc.StatusMalformed, nil)
			return
		}
		lost, held := t.Heartbeat(locks.ClientID(c.Client))
		data, _ := proto.Marshal(&pb.HeartbeatReply{
			TimeoutMs: uint32(t.Timeout() / time.Millisecond), LocksLost: lost, Locks: uint32(held),
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
		l, ok, err := t.Get(r)
		if err != nil {
			c.Reply(statusOf(err), nil)
			return
		}
		reply := &pb.LockReply{Type: locks.Unlock}
		if ok {
			reply = &pb.LockReply{Type: l.Type, Start: l.Start, End: l.End, Pid: l.Pid}
		}
		data, _ := proto.Marshal(reply)
		c.Reply(0, data)
	case pb.Method_SETLK:
		c.Reply(statusOf(t.Set(r)), nil)
	case pb.Method_SETLKW:
		wait := time.Duration(req.WaitMs) * time.Millisecond
		t.SetWait(r, req.Token, wait, func(errno syscall.Errno) { c.Reply(uint32(errno), nil) })
	case pb.Method_LOCK_CANCEL:
		t.Cancel(locks.ClientID(c.Client), req.Token)
		c.Reply(0, nil)
	}
}

// decodeLock decodes a lock call of client from the network. The request
// is checked when the lock table takes it.
func decodeLock(client rpc.ClientID, payload []byte) (locks.Request, *pb.LockRequest, error) {
	var req pb.LockRequest
	if err := proto.Unmarshal(payload, &req); err != nil {
		return locks.Request{}, nil, err
	}
	return locks.Request{
		Ino: req.Ino, Owner: locks.Owner{Client: locks.ClientID(client), ID: req.Owner}, Type: req.Type,
		Start: req.Start, End: req.End, Pid: req.Pid, Flock: req.Flock,
	}, &req, nil
}
