package server

import (
	"fmt"
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/canopyfs/canopy/internal/rpc"
)

// File locks: flock(2) locks and POSIX record locks (fcntl F_SETLK,
// F_SETLKW, F_GETLK), kept per client session in the memory of the
// partition that owns the inode. They are not logged or checkpointed:
// after a restart nobody holds a lock, and clients take them again (or
// learn from a heartbeat that they lost them). See docs/fuse.md.

// Lock types, as Linux numbers them.
const (
	lockRead   = syscall.F_RDLCK
	lockWrite  = syscall.F_WRLCK
	lockUnlock = syscall.F_UNLCK
)

// LockEOF is the last byte of a lock that runs to the end of the file
// (the kernel's OFFSET_MAX).
const LockEOF = math.MaxInt64

// Defaults of the lock table.
const (
	// DefaultLockTimeout is how long a client holding locks may stay
	// silent (no lock call, no heartbeat) before it loses them.
	DefaultLockTimeout = 10 * time.Second
	// maxLockWait caps how long a SETLKW call is held before it is
	// answered EAGAIN (the client then asks again).
	maxLockWait = 5 * time.Second
	// maxLocksPerClient bounds the lock entries (ranges and flocks) and
	// waits one client may hold; beyond it a lock fails with ENOLCK.
	maxLocksPerClient = 1 << 16
	// lostMemory is how long the table remembers that a client lost its
	// locks, to tell it at its next heartbeat.
	lostMemory = 10 * time.Minute
)

// lockOwner is who holds a lock: a client session and the owner id the
// client gives (the kernel's lock owner).
type lockOwner struct {
	client rpc.ClientID
	owner  uint64
}

// heldLock is one lock: a byte range [start, end] of a POSIX lock, or the
// whole file for a flock.
type heldLock struct {
	owner      lockOwner
	typ        uint32 // lockRead or lockWrite
	start, end uint64 // inclusive
	pid        uint32
}

func (l *heldLock) overlaps(start, end uint64) bool { return l.start <= end && start <= l.end }

// lockReq is a decoded lock call.
type lockReq struct {
	ino        uint64
	owner      lockOwner
	typ        uint32
	start, end uint64
	pid        uint32
	flock      bool
}

// fileLocks are the locks and waits on one inode.
type fileLocks struct {
	posix   []heldLock
	flocks  []heldLock
	waiters []*lockWaiter // SETLKW calls in arrival order
}

func (f *fileLocks) empty() bool {
	return len(f.posix) == 0 && len(f.flocks) == 0 && len(f.waiters) == 0
}

// conflict returns the first lock that keeps r from being taken: another
// owner's lock overlapping it where either is a write lock.
func (f *fileLocks) conflict(r *lockReq) (heldLock, bool) {
	locks := f.posix
	if r.flock {
		locks = f.flocks
	}
	for _, l := range locks {
		if l.owner != r.owner && (l.typ == lockWrite || r.typ == lockWrite) && l.overlaps(r.start, r.end) {
			return l, true
		}
	}
	return heldLock{}, false
}

// apply takes, changes or releases r's lock, which must not conflict.
// For POSIX locks the owner's ranges are split where r cuts them and
// merged with r where they touch it with the same type; a flock replaces
// the owner's flock.
func (f *fileLocks) apply(r *lockReq) {
	if r.flock {
		out := f.flocks[:0]
		for _, l := range f.flocks {
			if l.owner != r.owner {
				out = append(out, l)
			}
		}
		f.flocks = out
		if r.typ != lockUnlock {
			f.flocks = append(f.flocks, heldLock{owner: r.owner, typ: r.typ, start: 0, end: LockEOF, pid: r.pid})
		}
		return
	}
	var out []heldLock
	for _, l := range f.posix {
		if l.owner != r.owner || !l.overlaps(r.start, r.end) {
			out = append(out, l)
			continue
		}
		if l.start < r.start {
			left := l
			left.end = r.start - 1
			out = append(out, left)
		}
		if l.end > r.end {
			right := l
			right.start = r.end + 1
			out = append(out, right)
		}
	}
	if r.typ != lockUnlock {
		n := heldLock{owner: r.owner, typ: r.typ, start: r.start, end: r.end, pid: r.pid}
		for i := 0; i < len(out); {
			l := out[i]
			// Ends are at most LockEOF, so end+1 cannot overflow.
			if l.owner == r.owner && l.typ == n.typ && (l.end+1 == n.start || n.end+1 == l.start) {
				n.start, n.end = min(n.start, l.start), max(n.end, l.end)
				out = append(out[:i], out[i+1:]...)
				continue
			}
			i++
		}
		out = append(out, n)
	}
	f.posix = out
}

// count is the number of lock entries and waits client has here.
func (f *fileLocks) count(client rpc.ClientID) int {
	n := 0
	for _, l := range f.posix {
		if l.owner.client == client {
			n++
		}
	}
	for _, l := range f.flocks {
		if l.owner.client == client {
			n++
		}
	}
	for _, w := range f.waiters {
		if w.req.owner.client == client {
			n++
		}
	}
	return n
}

// dropClient removes every lock and wait of client; it returns the waits
// removed.
func (f *fileLocks) dropClient(client rpc.ClientID) []*lockWaiter {
	keep := func(ls []heldLock) []heldLock {
		out := ls[:0]
		for _, l := range ls {
			if l.owner.client != client {
				out = append(out, l)
			}
		}
		return out
	}
	f.posix, f.flocks = keep(f.posix), keep(f.flocks)
	var gone []*lockWaiter
	ws := f.waiters[:0]
	for _, w := range f.waiters {
		if w.req.owner.client == client {
			gone = append(gone, w)
		} else {
			ws = append(ws, w)
		}
	}
	f.waiters = ws
	return gone
}

// lockWaiter is a SETLKW call held until its lock can be taken, its wait
// ends, it is cancelled, or its client goes.
type lockWaiter struct {
	req   lockReq
	token uint64
	reply func(status uint32) // answers the call; called once, never under the table's mutex
	timer *time.Timer
	done  bool
}

// waitKey names a wait for LOCK_CANCEL.
type waitKey struct {
	client rpc.ClientID
	token  uint64
}

// lockSession is what the table knows of a client holding locks or
// waiting for one.
type lockSession struct {
	lastSeen time.Time
	held     map[uint64]int // lock entries and waits per inode
	total    int
}

// lockTable holds a partition's locks. Any goroutine may call it (the RPC
// readers answer lock calls themselves, the sweeper expires silent
// sessions, timers end waits); mu guards everything in it. Replies to
// waiting calls are sent after mu is released.
type lockTable struct {
	timeout time.Duration
	now     func() time.Time

	mu       sync.Mutex
	files    map[uint64]*fileLocks
	sessions map[rpc.ClientID]*lockSession
	waits    map[waitKey]*lockWaiter
	lost     map[rpc.ClientID]time.Time // clients whose locks expired, until they hear of it
	early    map[waitKey]time.Time      // LOCK_CANCELs that came before their SETLKW
	expired  uint64                     // sessions expired, for metrics
}

func newLockTable(timeout time.Duration, now func() time.Time) *lockTable {
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	if now == nil {
		now = time.Now
	}
	return &lockTable{
		timeout: timeout, now: now,
		files:    make(map[uint64]*fileLocks),
		sessions: make(map[rpc.ClientID]*lockSession),
		waits:    make(map[waitKey]*lockWaiter),
		lost:     make(map[rpc.ClientID]time.Time),
		early:    make(map[waitKey]time.Time),
	}
}

// ErrLockRange reports a lock range that is not one: start after end, or
// past the largest file offset.
var ErrLockRange = fmt.Errorf("lock range out of bounds: %w", syscall.EINVAL)

// check validates r, filling in a flock's range.
func (r *lockReq) check() error {
	switch r.typ {
	case lockRead, lockWrite, lockUnlock:
	default:
		return fmt.Errorf("lock type %d: %w", r.typ, syscall.EINVAL)
	}
	if r.flock {
		r.start, r.end = 0, LockEOF
		return nil
	}
	if r.start > r.end || r.end > LockEOF {
		return ErrLockRange
	}
	return nil
}

// touch marks client as heard from; mu held.
func (t *lockTable) touch(client rpc.ClientID) *lockSession {
	s := t.sessions[client]
	if s == nil {
		s = &lockSession{held: make(map[uint64]int)}
		t.sessions[client] = s
	}
	s.lastSeen = t.now()
	return s
}

// recount updates client's session for its locks on ino; mu held.
func (t *lockTable) recount(client rpc.ClientID, ino uint64, f *fileLocks) {
	s := t.sessions[client]
	if s == nil {
		return
	}
	n := f.count(client)
	s.total += n - s.held[ino]
	if n == 0 {
		delete(s.held, ino)
	} else {
		s.held[ino] = n
	}
}

// file returns ino's locks, creating them if create is set; mu held.
func (t *lockTable) file(ino uint64, create bool) *fileLocks {
	f := t.files[ino]
	if f == nil && create {
		f = &fileLocks{}
		t.files[ino] = f
	}
	return f
}

// forget drops ino's entry if nothing is left in it; mu held.
func (t *lockTable) forget(ino uint64, f *fileLocks) {
	if f.empty() {
		delete(t.files, ino)
	}
}

// getlk returns the first lock conflicting with r (ok false if none).
func (t *lockTable) getlk(r lockReq) (heldLock, bool, error) {
	if err := r.check(); err != nil {
		return heldLock{}, false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.touch(r.owner.client)
	f := t.file(r.ino, false)
	if f == nil || r.typ == lockUnlock {
		return heldLock{}, false, nil
	}
	l, ok := f.conflict(&r)
	return l, ok, nil
}

// setlk takes, changes or releases a lock at once: EAGAIN if another
// owner's lock conflicts, ENOLCK if the client holds too many.
func (t *lockTable) setlk(r lockReq) error {
	if err := r.check(); err != nil {
		return err
	}
	t.mu.Lock()
	replies, err := t.setLocked(&r)
	t.mu.Unlock()
	send(replies)
	return err
}

// setLocked is setlk with mu held; it returns the replies owed to waits
// that the change let through.
func (t *lockTable) setLocked(r *lockReq) ([]func(), error) {
	s := t.touch(r.owner.client)
	f := t.file(r.ino, r.typ != lockUnlock)
	if f == nil {
		return nil, nil // nothing to unlock
	}
	if r.typ != lockUnlock {
		if _, busy := f.conflict(r); busy {
			return nil, syscall.EAGAIN
		}
		if s.total >= maxLocksPerClient {
			return nil, syscall.ENOLCK
		}
	}
	f.apply(r)
	t.recount(r.owner.client, r.ino, f)
	replies := t.retry(r.ino, f)
	t.forget(r.ino, f)
	t.dropIdle(r.owner.client)
	return replies, nil
}

// setlkw is setlk that waits, up to wait, for a conflicting lock to go.
// reply answers the call: 0 once the lock is taken, EAGAIN when the wait
// ends first, EINTR when it is cancelled, another errno for a bad
// request. It is called exactly once, possibly before setlkw returns,
// never under mu. A client's wait with a token already waiting replaces
// nothing: the second fails with EBUSY.
func (t *lockTable) setlkw(r lockReq, token uint64, wait time.Duration, reply func(status uint32)) {
	if err := r.check(); err != nil {
		reply(statusOf(err))
		return
	}
	wait = min(max(wait, 0), maxLockWait)
	key := waitKey{client: r.owner.client, token: token}
	t.mu.Lock()
	if _, ok := t.early[key]; ok {
		delete(t.early, key)
		t.mu.Unlock()
		reply(uint32(syscall.EINTR))
		return
	}
	replies, err := t.setLocked(&r)
	if err != syscall.EAGAIN || wait == 0 {
		t.mu.Unlock()
		send(replies)
		reply(statusOf(err))
		return
	}
	s := t.sessions[r.owner.client]
	if _, dup := t.waits[key]; dup || s.total >= maxLocksPerClient {
		t.mu.Unlock()
		if dup {
			reply(uint32(syscall.EBUSY))
		} else {
			reply(uint32(syscall.ENOLCK))
		}
		return
	}
	w := &lockWaiter{req: r, token: token, reply: reply}
	f := t.file(r.ino, true)
	f.waiters = append(f.waiters, w)
	t.waits[key] = w
	t.recount(r.owner.client, r.ino, f)
	w.timer = time.AfterFunc(wait, func() { t.endWait(w, uint32(syscall.EAGAIN)) })
	t.mu.Unlock()
}

// cancel ends client's wait with token, answering it EINTR. A wait that
// already ended (granted, timed out) is left alone. A cancel that finds
// no wait is remembered for a while, in case its SETLKW is still on the
// way (it is then answered EINTR at once).
func (t *lockTable) cancel(client rpc.ClientID, token uint64) {
	t.mu.Lock()
	t.touch(client)
	key := waitKey{client: client, token: token}
	w := t.waits[key]
	if w == nil && len(t.early) < maxLocksPerClient {
		t.early[key] = t.now()
	}
	t.mu.Unlock()
	if w != nil {
		t.endWait(w, uint32(syscall.EINTR))
	}
}

// endWait answers w with status unless it has been answered.
func (t *lockTable) endWait(w *lockWaiter, status uint32) {
	t.mu.Lock()
	if w.done {
		t.mu.Unlock()
		return
	}
	t.unpark(w)
	client := w.req.owner.client
	if f := t.files[w.req.ino]; f != nil {
		for i, x := range f.waiters {
			if x == w {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				break
			}
		}
		t.recount(client, w.req.ino, f)
		t.forget(w.req.ino, f)
	}
	t.dropIdle(client)
	t.mu.Unlock()
	w.reply(status)
}

// unpark marks w answered and forgets its token and timer; mu held.
func (t *lockTable) unpark(w *lockWaiter) {
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	delete(t.waits, waitKey{client: w.req.owner.client, token: w.token})
}

// retry gives the waits on ino, in arrival order, the locks that no
// longer conflict: each wait is tried once per change. It returns their
// replies; mu held.
func (t *lockTable) retry(ino uint64, f *fileLocks) []func() {
	var replies []func()
	for i := 0; i < len(f.waiters); {
		w := f.waiters[i]
		if _, busy := f.conflict(&w.req); busy {
			i++
			continue
		}
		f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
		t.unpark(w)
		f.apply(&w.req)
		if s := t.sessions[w.req.owner.client]; s != nil {
			s.lastSeen = t.now()
		}
		t.recount(w.req.owner.client, ino, f)
		replies = append(replies, func() { w.reply(0) })
	}
	return replies
}

// release removes every lock of owner on ino of one kind (POSIX or
// flock): what closing a file does.
func (t *lockTable) release(ino uint64, owner lockOwner, flock bool) {
	t.setlk(lockReq{ino: ino, owner: owner, typ: lockUnlock, start: 0, end: LockEOF, flock: flock})
}

// heartbeat marks client as alive and reports whether it lost locks
// since it was last heard from, and how many it holds.
func (t *lockTable) heartbeat(client rpc.ClientID) (lost bool, held int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, lost = t.lost[client]; lost {
		delete(t.lost, client)
	}
	s := t.sessions[client]
	if s == nil {
		return lost, 0
	}
	s.lastSeen = t.now()
	return lost, s.total
}

// dropIdle forgets client's session if it holds nothing; mu held.
func (t *lockTable) dropIdle(client rpc.ClientID) {
	if s := t.sessions[client]; s != nil && s.total == 0 {
		delete(t.sessions, client)
	}
}

// releaseClient removes every lock and wait of client (its connections
// closed, or it went silent) and lets waiting calls of others through.
// Its own waits are answered EAGAIN. It reports whether client held
// anything.
func (t *lockTable) releaseClient(client rpc.ClientID) bool {
	t.mu.Lock()
	replies, had := t.releaseLocked(client)
	t.mu.Unlock()
	send(replies)
	return had
}

func (t *lockTable) releaseLocked(client rpc.ClientID) ([]func(), bool) {
	s := t.sessions[client]
	if s == nil {
		return nil, false
	}
	delete(t.sessions, client)
	var replies []func()
	for ino := range s.held {
		f := t.files[ino]
		if f == nil {
			continue
		}
		for _, w := range f.dropClient(client) {
			t.unpark(w)
			replies = append(replies, func() { w.reply(uint32(syscall.EAGAIN)) })
		}
		replies = append(replies, t.retry(ino, f)...)
		t.forget(ino, f)
	}
	return replies, s.total > 0
}

// expire releases the locks of every client silent for longer than the
// timeout, as of now, remembering that they lost them; it returns how
// many sessions it expired.
func (t *lockTable) expire(now time.Time) int {
	t.mu.Lock()
	var replies []func()
	n := 0
	for client, s := range t.sessions {
		if now.Sub(s.lastSeen) <= t.timeout {
			continue
		}
		r, had := t.releaseLocked(client)
		replies = append(replies, r...)
		if had {
			t.lost[client] = now
			n++
		}
	}
	for client, at := range t.lost {
		if now.Sub(at) > lostMemory {
			delete(t.lost, client)
		}
	}
	for key, at := range t.early {
		if now.Sub(at) > 2*maxLockWait {
			delete(t.early, key)
		}
	}
	t.expired += uint64(n)
	t.mu.Unlock()
	send(replies)
	return n
}

// stats returns the number of lock entries held and waits parked.
func (t *lockTable) stats() (locks, waits int, expired uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range t.files {
		locks += len(f.posix) + len(f.flocks)
	}
	return locks, len(t.waits), t.expired
}

// stop answers every wait EAGAIN (the server is closing).
func (t *lockTable) stop() {
	t.mu.Lock()
	var replies []func()
	for _, w := range t.waits {
		t.unpark(w)
		if f := t.files[w.req.ino]; f != nil {
			f.waiters = nil
		}
		replies = append(replies, func() { w.reply(uint32(syscall.EAGAIN)) })
	}
	t.mu.Unlock()
	send(replies)
}

func send(replies []func()) {
	for _, r := range replies {
		r()
	}
}
