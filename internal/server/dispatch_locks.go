package server

import (
	"errors"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
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
func serveLock(t *locks.Table, fwd *forwardsView, c *rpc.Call, m pb.Method) {
	if m == pb.Method_HEARTBEAT {
		var req pb.NodeRequest
		if err := proto.Unmarshal(c.Payload, &req); err != nil {
			c.Reply(rpc.StatusMalformed, nil)
			return
		}
		lost, held := t.Heartbeat(locks.ClientID(c.Client))
		grace := t.Grace()
		if grace > 0 && grace < time.Millisecond {
			grace = time.Millisecond
		}
		data, _ := proto.Marshal(&pb.HeartbeatReply{
			TimeoutMs: uint32(t.Timeout() / time.Millisecond), LocksLost: lost, Locks: uint32(held),
			GraceMs: uint32(grace / time.Millisecond),
		})
		c.Reply(0, data)
		return
	}
	r, req, err := decodeLock(c.Client, c.Payload)
	if err != nil {
		c.Reply(rpc.StatusMalformed, nil)
		return
	}
	if m != pb.Method_LOCK_CANCEL {
		// A node that moved here is locked under its number here; one
		// that left is locked where it went (the router sends the call
		// on), so that every number of a node names one lock.
		to, as, gone := fwd.resolve(engine.Ino(r.Ino))
		if gone {
			status, detail := movedReply(&pb.Moved{Partition: uint32(to), Ino: uint64(as)})
			data, _ := proto.Marshal(detail)
			c.Reply(status, data)
			return
		}
		r.Ino = uint64(as)
	}
	switch m {
	case pb.Method_GETLK:
		l, ok, err := t.Get(r)
		if errors.Is(err, locks.ErrGrace) {
			c.Reply(rpc.StatusUnavailable, nil) // retried by the client until the grace period ends
			return
		}
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
		Start: req.Start, End: req.End, Pid: req.Pid, Flock: req.Flock, Reclaim: req.Reclaim,
	}, &req, nil
}

// Locks across a failover. A replicated partition's lock table is its
// leader's, not replicated state: a new leader knows none of the locks
// the old one granted. It therefore starts its table again with a grace
// period (internal/locks, grace.go), as an NFS server does after a
// restart: for half a lock timeout after it took over, only reclaims are
// granted, which each client makes when its heartbeat's answer shows it
// fewer locks than it holds (clients send one every third of a timeout,
// client/locks.go); any other lock is refused with EAGAIN or, for SETLKW
// and GETLK, waits. So no client can take a lock its holder is about to
// take again. A replica that leads again later starts its table again
// too (the locks it remembers may have changed meanwhile). The first
// leader of a fresh group (no leader known before it in this process,
// and no state on disk when it opened) has nothing to wait for. A single
// server restarted on a directory that held a partition starts its table
// with the same grace period (server.go, Open).

// lockGraceShare: a new leader's grace period lasts the lock timeout
// divided by it.
const lockGraceShare = 2

// lockEpoch is the leadership the lock table serves. The RPC readers
// (before a lock call) and the lease sweep check it; mu guards it.
type lockEpoch struct {
	mu   sync.Mutex
	term uint64 // the term the table was started again for; 0: none yet
	// leadership reports the term this replica leads in (0: it does not)
	// and whether a leader was known before it (replica.Node.Leadership).
	leadership func() (uint64, bool)
	restarted  bool // the replica opened with state on disk: its clients may hold locks from before
}

// check starts t again, with a grace period unless nobody can have held
// a lock before, when this replica leads in a term the table has not
// served yet.
func (e *lockEpoch) check(t *locks.Table) {
	if e == nil {
		return
	}
	term, prior := e.leadership()
	if term == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if term == e.term {
		return
	}
	e.term = term
	grace := t.Timeout() / lockGraceShare
	if !prior && !e.restarted {
		grace = 0
	}
	t.Restart(grace)
}
