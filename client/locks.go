package client

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/locks"
	"github.com/canopyfs/canopy/internal/protocol"
)

// File locks, kept by the metadata service per client (see docs/fuse.md):
// POSIX record locks (fcntl) and whole-file flock locks. A lock's owner is
// this client together with an owner id the caller picks (a FUSE mount
// passes the kernel's lock owner), so two owners of one client conflict
// like two processes. The service releases a client's locks when its
// connections close, or when it has not heard from the client for its
// lock timeout: once it has taken a lock or opened a file in a partition,
// the client sends that partition a heartbeat a few times per timeout,
// through whichever server or router it is connected to at the time. The
// heartbeats renew its session's lease too: a partition ends the session
// (closing the client's files) of a client behind a router that it has not
// heard from for a timeout, as when the router died with the client.

// LockType is a lock's type, as Linux numbers them.
type LockType uint32

// Lock types.
const (
	ReadLock  LockType = syscall.F_RDLCK
	WriteLock LockType = syscall.F_WRLCK
	Unlock    LockType = syscall.F_UNLCK
)

// LockEOF as a lock's End means up to the end of the file, however long
// it grows.
const LockEOF = math.MaxInt64

// Lock is a byte-range lock: bytes Start to End, inclusive.
type Lock struct {
	Type       LockType // ReadLock, WriteLock or Unlock
	Start, End uint64   // first and last byte; End LockEOF: to the end, however long the file grows
	Pid        uint32   // the locking process, as GetLk reports it to others
}

// lockWaitSlice is how long one SETLKW call may wait in the service
// before the client asks again.
const lockWaitSlice = 2 * time.Second

// lockState is what the clients sharing one connection know about their
// locks: where to send heartbeats, and the locks they hold (mine). Guarded
// by mu; the heartbeat goroutine runs from the first lock taken until
// Close.
//
// mine mirrors the locks the service granted, by the same rules (it is a
// lock table of its own, with this client as its one client): a
// replicated partition's lock table is its leader's, not replicated
// state, so after a failover the new leader knows none of them. A
// heartbeat's answer tells how many the partition knows this client
// holds; when that is fewer than mine holds there, the client takes them
// again (SETLK marked as a reclaim), which the new leader's grace period
// keeps for it: only reclaims are granted until then. A lock someone
// else took meanwhile (a reclaim that came too late) is reported lost
// (OnLocksLost).
type lockState struct {
	tokens atomic.Uint64
	mine   *locks.Table // any goroutine may use it
	// changing counts the lock calls in flight, and changes every call
	// begun: a heartbeat's count is compared with mine only when no call
	// was in flight around it, so a lock change that the service made and
	// mine does not show yet is not taken for a loss.
	changing, changes atomic.Int64

	mu       sync.Mutex
	parts    map[uint16]Ino // a locked inode per partition: heartbeats go there
	interval time.Duration
	started  bool
	closed   bool
	stop     chan struct{}
	done     chan struct{}
	onLost   func(Ino)
	soon     bool          // the heartbeat goroutine's: a heartbeat failed, send the next round soon
	kick     chan struct{} // the connection broke: send a round now
}

func newLockState(onLost func(Ino)) *lockState {
	return &lockState{mine: locks.New(time.Duration(math.MaxInt64), nil),
		parts: make(map[uint16]Ino), interval: time.Second, // until the service tells its timeout
		stop: make(chan struct{}), done: make(chan struct{}), onLost: onLost, kick: make(chan struct{}, 1)}
}

// broken is the transport's OnBroken: the client's connection broke,
// and the next call redials, perhaps another router than before. The
// heartbeats go at once, so that every partition holding the client's
// opens and locks hears it through the router it reaches before the
// router it left ends its session there (server/session_end.go).
func (s *lockState) broken() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// GetLk returns the first lock of another owner that conflicts with lk
// (a lock of Type Unlock if none does).
func (c *Client) GetLk(ctx context.Context, ino Ino, owner uint64, lk Lock) (Lock, error) {
	var r pb.LockReply
	req := lockRequest(ino, owner, lk, false)
	if err := c.call(ctx, pb.Method_GETLK, req, &r, "getlk", inoName(ino)); err != nil {
		return Lock{}, err
	}
	return Lock{Type: LockType(r.Type), Start: r.Start, End: r.End, Pid: r.Pid}, nil
}

// SetLk takes, changes or releases (Type Unlock) owner's lock on bytes
// lk.Start to lk.End of ino at once; it fails with EAGAIN if another
// owner's lock conflicts.
func (c *Client) SetLk(ctx context.Context, ino Ino, owner uint64, lk Lock) error {
	return c.setLock(ctx, pb.Method_SETLK, ino, lockRequest(ino, owner, lk, false), "setlk")
}

// SetLkw is SetLk that waits until the lock can be taken. If ctx ends
// first it returns EINTR, unless the service granted the lock in the
// meantime: then the lock is held and SetLkw returns nil.
func (c *Client) SetLkw(ctx context.Context, ino Ino, owner uint64, lk Lock) error {
	return c.setLockWait(ctx, ino, lockRequest(ino, owner, lk, false), "setlkw")
}

// Flock takes (ReadLock: shared, WriteLock: exclusive) or releases
// (Unlock) owner's whole-file lock on ino, like flock(2). With wait it
// waits as SetLkw does; without, a conflicting lock fails it with EAGAIN.
// flock locks and POSIX locks do not conflict with each other, as on
// Linux.
func (c *Client) Flock(ctx context.Context, ino Ino, owner uint64, typ LockType, wait bool) error {
	req := lockRequest(ino, owner, Lock{Type: typ, End: LockEOF}, true)
	if wait {
		return c.setLockWait(ctx, ino, req, "flock")
	}
	return c.setLock(ctx, pb.Method_SETLK, ino, req, "flock")
}

func lockRequest(ino Ino, owner uint64, lk Lock, flock bool) *pb.LockRequest {
	return &pb.LockRequest{Ino: uint64(ino), Owner: owner, Type: uint32(lk.Type), Start: lk.Start, End: lk.End, Pid: lk.Pid, Flock: flock}
}

func (c *Client) setLock(ctx context.Context, m pb.Method, ino Ino, req *pb.LockRequest, op string) error {
	defer c.locks.change()()
	if err := c.call(ctx, m, req, nil, op, inoName(ino)); err != nil {
		return err
	}
	c.locks.granted(req)
	if LockType(req.Type) != Unlock {
		c.locks.held(c, ino)
	}
	return nil
}

// setLockWait asks the service to wait for the lock, a slice of time at
// a time. Each ask is made without ctx, so that its answer is always
// heard: when ctx ends, the client cancels the wait (LOCK_CANCEL) and
// takes the service's answer, which is EINTR unless the lock was granted
// just before.
func (c *Client) setLockWait(ctx context.Context, ino Ino, req *pb.LockRequest, op string) error {
	req.WaitMs = uint32(min(lockWaitSlice, c.callTimeout/2) / time.Millisecond)
	for {
		req.Token = c.locks.tokens.Add(1)
		done := make(chan error, 1)
		go func(req *pb.LockRequest) {
			done <- c.call(context.Background(), pb.Method_SETLKW, req, nil, op, inoName(ino))
		}(cloneLockRequest(req))
		var err error
		select {
		case err = <-done:
		case <-ctx.Done():
			cancel := &pb.LockRequest{Ino: req.Ino, Owner: req.Owner, Token: req.Token}
			if cerr := c.call(context.Background(), pb.Method_LOCK_CANCEL, cancel, nil, op, inoName(ino)); cerr != nil {
				return cerr // the wait still ends in the service, at its time limit
			}
			if err = <-done; errors.Is(err, syscall.EAGAIN) {
				err = &pathError{Op: op, Path: inoName(ino), Err: syscall.EINTR}
			}
			if err == nil && LockType(req.Type) != Unlock {
				c.locks.held(c, ino)
			}
			return err
		}
		if errors.Is(err, syscall.EAGAIN) {
			continue // the wait slice ended: ask again
		}
		if err == nil {
			c.locks.granted(req)
			c.locks.changes.Add(1) // a wait may last long: counted once it ended, not while in flight
		}
		if err == nil && LockType(req.Type) != Unlock {
			c.locks.held(c, ino)
		}
		return err
	}
}

func cloneLockRequest(r *pb.LockRequest) *pb.LockRequest {
	return &pb.LockRequest{Ino: r.Ino, Owner: r.Owner, Type: r.Type, Start: r.Start, End: r.End, Pid: r.Pid,
		Flock: r.Flock, WaitMs: r.WaitMs, Token: r.Token}
}

// held notes that c holds a lock on ino or has it open, so that
// heartbeats reach ino's partition, and starts the heartbeats if they
// have not started.
func (s *lockState) held(c *Client, ino Ino) {
	s.mu.Lock()
	defer s.mu.Unlock()
	part := protocol.PartitionOf(uint64(ino))
	if _, ok := s.parts[part]; !ok {
		s.parts[part] = ino
	}
	if !s.started {
		s.started = true
		go s.heartbeats(c)
	}
}

// heartbeats tells every partition where the client took locks that it
// is alive, three times per lock timeout (as the service reports it),
// until close.
func (s *lockState) heartbeats(c *Client) {
	defer close(s.done)
	first := true // the first goes at once: its answer tells the timeout
	for {
		s.mu.Lock()
		interval := s.interval
		targets := make([]Ino, 0, len(s.parts))
		for _, ino := range s.parts {
			targets = append(targets, ino)
		}
		s.mu.Unlock()
		if first {
			interval, first = 0, false
		}
		if s.soon {
			// A heartbeat failed (a failover, most likely): the next
			// round goes sooner, so that the locks are taken again within
			// the new leader's grace period.
			interval, s.soon = min(interval, 100*time.Millisecond), false
		}
		select {
		case <-s.stop:
			return
		case <-time.After(interval):
		case <-s.kick:
		}
		for _, ino := range targets {
			before := s.changes.Load()
			quiet := s.changing.Load() == 0
			r, err := c.Heartbeat(context.Background(), ino)
			if err != nil {
				s.soon = true
				continue // the next one may get through; the timeout is several intervals
			}
			quiet = quiet && s.changing.Load() == 0 && s.changes.Load() == before
			switch part := ino.Partition(); {
			case r.LocksLost:
				s.forget(part)
				if s.onLost != nil {
					s.onLost(ino)
				}
			case quiet && r.Locks < len(s.mineIn(part)):
				s.reclaim(c, part)
			}
			if r.Timeout > 0 {
				s.mu.Lock()
				s.interval = max(r.Timeout/3, 10*time.Millisecond)
				s.mu.Unlock()
			}
		}
	}
}

// close stops the heartbeats.
func (s *lockState) close() {
	s.mu.Lock()
	started, closed := s.started, s.closed
	s.started, s.closed = true, true // no heartbeats after close
	s.mu.Unlock()
	if closed {
		return
	}
	close(s.stop)
	if started {
		<-s.done
	}
}

// HeartbeatInfo is the service's answer to a heartbeat.
type HeartbeatInfo struct {
	Timeout   time.Duration // how long the client may stay silent and keep its locks
	LocksLost bool          // the client's locks in that partition expired since it was last heard
	Locks     int           // locks (and waits) the client holds there
	Grace     time.Duration // the partition grants only reclaims for this much longer (a failover's grace period)
}

// Heartbeat tells ino's partition that the client is alive, keeping its
// locks there. A client that holds locks sends them by itself.
func (c *Client) Heartbeat(ctx context.Context, ino Ino) (HeartbeatInfo, error) {
	var r pb.HeartbeatReply
	if err := c.call(ctx, pb.Method_HEARTBEAT, &pb.NodeRequest{Ino: uint64(ino)}, &r, "heartbeat", inoName(ino)); err != nil {
		return HeartbeatInfo{}, err
	}
	return HeartbeatInfo{Timeout: time.Duration(r.TimeoutMs) * time.Millisecond, LocksLost: r.LocksLost, Locks: int(r.Locks),
		Grace: time.Duration(r.GraceMs) * time.Millisecond}, nil
}

// change counts a lock call begun; the function it returns counts it
// ended.
func (s *lockState) change() func() {
	s.changes.Add(1)
	s.changing.Add(1)
	return func() { s.changing.Add(-1) }
}

// granted notes in mine a lock change the service granted.
func (s *lockState) granted(r *pb.LockRequest) {
	_ = s.mine.Set(mineRequest(r)) // the service's rules: what it granted is granted here
}

func mineRequest(r *pb.LockRequest) locks.Request {
	return locks.Request{Ino: r.Ino, Owner: locks.Owner{ID: r.Owner}, Type: r.Type, Start: r.Start, End: r.End,
		Pid: r.Pid, Flock: r.Flock}
}

// stillMine reports whether mine still holds all of l, once the lock calls
// in flight have ended (waiting at most a few seconds for them).
func (s *lockState) stillMine(l locks.Request) bool {
	for deadline := time.Now().Add(5 * time.Second); s.changing.Load() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	for _, m := range s.mine.Locks(locks.ClientID{}) {
		if m.Ino == l.Ino && m.Owner == l.Owner && m.Flock == l.Flock && m.Type == l.Type && m.Start <= l.Start && m.End >= l.End {
			return true
		}
	}
	return false
}

// mineIn returns the locks mine holds in partition part.
func (s *lockState) mineIn(part uint16) []locks.Request {
	var out []locks.Request
	for _, l := range s.mine.Locks(locks.ClientID{}) {
		if protocol.PartitionOf(l.Ino) == part {
			out = append(out, l)
		}
	}
	return out
}

// forget drops from mine the locks of partition part, which the service
// no longer holds for this client.
func (s *lockState) forget(part uint16) {
	for _, l := range s.mineIn(part) {
		l.Type = uint32(Unlock)
		_ = s.mine.Set(l)
	}
}

// reclaim takes again, on the heartbeat goroutine, the locks mine holds in
// partition part, which the partition no longer knows (a replicated
// partition's new leader). A lock another client took in the meantime is
// lost: dropped from mine and reported.
//
// A lock call of the caller's that runs while a lock is taken again may
// have released it: the lock is then released again, so that a retake
// never brings back a lock the caller let go.
func (s *lockState) reclaim(c *Client, part uint16) {
	for _, l := range s.mineIn(part) {
		before := s.changes.Load()
		req := &pb.LockRequest{Ino: l.Ino, Owner: l.Owner.ID, Type: l.Type, Start: l.Start, End: l.End, Pid: l.Pid,
			Flock: l.Flock, Reclaim: true}
		err := c.call(context.Background(), pb.Method_SETLK, req, nil, "reclaim lock", inoName(Ino(l.Ino)))
		if err == nil {
			if s.changes.Load() != before && !s.stillMine(l) {
				// Release the range, then take again what mine holds of it now.
				undo := cloneLockRequest(req)
				undo.Type = uint32(Unlock)
				_ = c.call(context.Background(), pb.Method_SETLK, undo, nil, "reclaim lock", inoName(Ino(l.Ino)))
				for _, m := range s.mine.Locks(locks.ClientID{}) {
					if m.Ino == l.Ino && m.Owner == l.Owner && m.Flock == l.Flock && m.Start <= l.End && m.End >= l.Start {
						again := &pb.LockRequest{Ino: m.Ino, Owner: m.Owner.ID, Type: m.Type, Start: m.Start, End: m.End, Pid: m.Pid,
							Flock: m.Flock, Reclaim: true}
						_ = c.call(context.Background(), pb.Method_SETLK, again, nil, "reclaim lock", inoName(Ino(m.Ino)))
					}
				}
			}
			continue
		}
		if !errors.Is(err, syscall.EAGAIN) {
			continue // to be tried at the next heartbeat
		}
		l.Type = uint32(Unlock)
		_ = s.mine.Set(l)
		if s.onLost != nil {
			s.onLost(Ino(l.Ino))
		}
	}
}
