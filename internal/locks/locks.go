// Package locks is a partition's file lock manager: flock(2) locks and
// POSIX record locks (fcntl F_SETLK, F_SETLKW, F_GETLK), kept per client
// session in the memory of the partition that owns the inode.
//
// Locks are not logged or checkpointed: after a restart nobody holds a
// lock, and clients take them again (or learn from a heartbeat that they
// lost them); a table started again after a failover or a restart keeps a
// grace period in which only those reclaims are granted (grace.go). See
// docs/fuse.md and docs/security.md. The package knows nothing of the wire: the
// metadata server decodes lock calls into Requests and answers them with
// what the Table returns.
//
// A Table may be used from any goroutine (the metadata server's RPC
// readers call it, its sweeper goroutine runs Sweep, timers end waits);
// one mutex guards everything in it.
package locks

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"syscall"
	"time"
)

// Lock types, as Linux numbers them.
const (
	Read   = syscall.F_RDLCK
	Write  = syscall.F_WRLCK
	Unlock = syscall.F_UNLCK
)

// EOF is the last byte of a lock that runs to the end of the file (the
// kernel's OFFSET_MAX).
const EOF = math.MaxInt64

// Defaults and bounds of the lock table.
const (
	// DefaultTimeout is how long a client holding locks may stay
	// silent (no lock call, no heartbeat) before it loses them.
	DefaultTimeout = 10 * time.Second
	// maxWait caps how long a SETLKW call is held before it is
	// answered EAGAIN (the client then asks again).
	maxWait = 5 * time.Second
	// maxPerClient bounds the lock entries (ranges and flocks) and
	// waits one client may hold; beyond it a lock fails with ENOLCK.
	maxPerClient = 1 << 16
	// lostMemory is how long the table remembers that a client lost its
	// locks, to tell it at its next heartbeat.
	lostMemory = 10 * time.Minute
)

// ClientID names a client session (the metadata server uses the id the
// client gave in its hello).
type ClientID [16]byte

// Owner is who holds a lock: a client session and the owner id the
// client gives (the kernel's lock owner).
type Owner struct {
	Client ClientID
	ID     uint64
}

// Lock is one lock: a byte range [Start, End] of a POSIX lock, or the
// whole file for a flock.
type Lock struct {
	Owner      Owner
	Type       uint32 // Read or Write
	Start, End uint64 // inclusive
	Pid        uint32
}

func (l *Lock) overlaps(start, end uint64) bool { return l.Start <= end && start <= l.End }

// Request is one lock call: take, change or release (Type Unlock) the
// lock of Owner on the range [Start, End] of inode Ino, or its flock of
// the whole file. The Table checks it (Type known, Start <= End <= EOF).
type Request struct {
	Ino        uint64
	Owner      Owner
	Type       uint32
	Start, End uint64
	Pid        uint32
	Flock      bool
	// Reclaim marks a lock the client held before a failover or restart
	// and takes again: during the grace period (Restart) only these are
	// granted.
	Reclaim bool
}

// lockWaiter is a SETLKW call held until its lock can be taken, its wait
// ends, it is cancelled, or its client goes.
type lockWaiter struct {
	req   Request
	token uint64
	reply func(errno syscall.Errno) // answers the call; called once, never under the table's mutex
	timer *time.Timer
	done  bool
}

// waitKey names a wait for LOCK_CANCEL.
type waitKey struct {
	client ClientID
	token  uint64
}

// lockSession is what the table knows of a client holding locks or
// waiting for one.
type lockSession struct {
	lastSeen time.Time
	held     map[uint64]int // lock entries and waits per inode
	total    int
}

// Table holds a partition's locks. Any goroutine may call it (the
// metadata server's RPC readers answer lock calls themselves, the sweeper
// expires silent sessions, timers end waits); mu guards everything
// in it. Replies to waiting calls are sent after mu is released.
type Table struct {
	timeout time.Duration
	now     func() time.Time

	mu       sync.Mutex
	files    map[uint64]*fileLocks
	sessions map[ClientID]*lockSession
	waits    map[waitKey]*lockWaiter
	lost     map[ClientID]time.Time // clients whose locks expired, until they hear of it
	early    map[waitKey]time.Time  // LOCK_CANCELs that came before their SETLKW
	expired  uint64                 // sessions expired, for metrics

	// graceUntil is the end of the grace period (grace.go); graceTimer
	// lets the waits through when it ends.
	graceUntil time.Time
	graceTimer *time.Timer
}

// New returns an empty table whose clients lose their locks after timeout
// of silence (DefaultTimeout if not positive); now is the clock (nil:
// time.Now).
func New(timeout time.Duration, now func() time.Time) *Table {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if now == nil {
		now = time.Now
	}
	return &Table{
		timeout: timeout, now: now,
		files:    make(map[uint64]*fileLocks),
		sessions: make(map[ClientID]*lockSession),
		waits:    make(map[waitKey]*lockWaiter),
		lost:     make(map[ClientID]time.Time),
		early:    make(map[waitKey]time.Time),
	}
}

// ErrRange reports a lock range that is not one: start after end, or
// past the largest file offset.
var ErrRange = fmt.Errorf("lock range out of bounds: %w", syscall.EINVAL)

// check validates r, filling in a flock's range.
func (r *Request) check() error {
	switch r.Type {
	case Read, Write, Unlock:
	default:
		return fmt.Errorf("lock type %d: %w", r.Type, syscall.EINVAL)
	}
	if r.Flock {
		r.Start, r.End = 0, EOF
		return nil
	}
	if r.Start > r.End || r.End > EOF {
		return ErrRange
	}
	return nil
}

// touch marks client as heard from; mu held.
func (t *Table) touch(client ClientID) *lockSession {
	s := t.sessions[client]
	if s == nil {
		s = &lockSession{held: make(map[uint64]int)}
		t.sessions[client] = s
	}
	s.lastSeen = t.now()
	return s
}

// recount updates client's session for its locks on ino; mu held.
func (t *Table) recount(client ClientID, ino uint64, f *fileLocks) {
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
func (t *Table) file(ino uint64, create bool) *fileLocks {
	f := t.files[ino]
	if f == nil && create {
		f = &fileLocks{}
		t.files[ino] = f
	}
	return f
}

// forget drops ino's entry if nothing is left in it; mu held.
func (t *Table) forget(ino uint64, f *fileLocks) {
	if f.empty() {
		delete(t.files, ino)
	}
}

// Get returns the first lock conflicting with r (ok false if none).
func (t *Table) Get(r Request) (Lock, bool, error) {
	if err := r.check(); err != nil {
		return Lock{}, false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.touch(r.Owner.Client)
	f := t.file(r.Ino, false)
	if r.Type == Unlock {
		return Lock{}, false, nil
	}
	var l Lock
	ok := false
	if f != nil {
		l, ok = f.conflict(&r)
	}
	if !ok && t.graceHolds(&r) {
		return Lock{}, false, ErrGrace // a lock not yet reclaimed may conflict
	}
	return l, ok, nil
}

// Set takes, changes or releases a lock at once: EAGAIN if another
// owner's lock conflicts, ENOLCK if the client holds too many.
func (t *Table) Set(r Request) error {
	if err := r.check(); err != nil {
		return err
	}
	t.mu.Lock()
	replies, err := t.setLocked(&r)
	t.mu.Unlock()
	send(replies)
	return err
}

// setLocked is Set with mu held; it returns the replies owed to waits
// that the change let through.
func (t *Table) setLocked(r *Request) ([]func(), error) {
	s := t.touch(r.Owner.Client)
	f := t.file(r.Ino, r.Type != Unlock)
	if f == nil {
		return nil, nil // nothing to unlock
	}
	if r.Type != Unlock {
		if t.graceHolds(r) {
			return nil, ErrGrace
		}
		if _, busy := f.conflict(r); busy {
			return nil, syscall.EAGAIN
		}
		if s.total >= maxPerClient {
			return nil, syscall.ENOLCK
		}
	}
	f.apply(r)
	t.recount(r.Owner.Client, r.Ino, f)
	replies := t.retry(r.Ino, f)
	t.forget(r.Ino, f)
	t.dropIdle(r.Owner.Client)
	return replies, nil
}

// SetWait is Set that waits, up to wait, for a conflicting lock to go.
// reply answers the call: 0 once the lock is taken, EAGAIN when the wait
// ends first, EINTR when it is cancelled, another errno for a bad
// request. It is called exactly once, possibly before SetWait returns,
// never under mu. A client's wait with a token already waiting replaces
// nothing: the second fails with EBUSY.
func (t *Table) SetWait(r Request, token uint64, wait time.Duration, reply func(errno syscall.Errno)) {
	if err := r.check(); err != nil {
		reply(errnoOf(err))
		return
	}
	wait = min(max(wait, 0), maxWait)
	key := waitKey{client: r.Owner.Client, token: token}
	t.mu.Lock()
	if _, ok := t.early[key]; ok {
		delete(t.early, key)
		t.mu.Unlock()
		reply(syscall.EINTR)
		return
	}
	replies, err := t.setLocked(&r)
	if err == ErrGrace {
		err = syscall.EAGAIN // waits until the grace period ends
	}
	if err != syscall.EAGAIN || wait == 0 {
		t.mu.Unlock()
		send(replies)
		reply(errnoOf(err))
		return
	}
	s := t.sessions[r.Owner.Client]
	if _, dup := t.waits[key]; dup || s.total >= maxPerClient {
		t.mu.Unlock()
		if dup {
			reply(syscall.EBUSY)
		} else {
			reply(syscall.ENOLCK)
		}
		return
	}
	w := &lockWaiter{req: r, token: token, reply: reply}
	f := t.file(r.Ino, true)
	f.waiters = append(f.waiters, w)
	t.waits[key] = w
	t.recount(r.Owner.Client, r.Ino, f)
	w.timer = time.AfterFunc(wait, func() { t.endWait(w, syscall.EAGAIN) })
	t.mu.Unlock()
}

// Cancel ends client's wait with token, answering it EINTR. A wait that
// already ended (granted, timed out) is left alone. A cancel that finds
// no wait is remembered for a while, in case its SETLKW is still on the
// way (it is then answered EINTR at once).
func (t *Table) Cancel(client ClientID, token uint64) {
	t.mu.Lock()
	t.touch(client)
	key := waitKey{client: client, token: token}
	w := t.waits[key]
	if w == nil && len(t.early) < maxPerClient {
		t.early[key] = t.now()
	}
	t.mu.Unlock()
	if w != nil {
		t.endWait(w, syscall.EINTR)
	}
}

// endWait answers w with errno unless it has been answered.
func (t *Table) endWait(w *lockWaiter, errno syscall.Errno) {
	t.mu.Lock()
	if w.done {
		t.mu.Unlock()
		return
	}
	t.unpark(w)
	client := w.req.Owner.Client
	if f := t.files[w.req.Ino]; f != nil {
		for i, x := range f.waiters {
			if x == w {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				break
			}
		}
		t.recount(client, w.req.Ino, f)
		t.forget(w.req.Ino, f)
	}
	t.dropIdle(client)
	t.mu.Unlock()
	w.reply(errno)
}

// unpark marks w answered and forgets its token and timer; mu held.
func (t *Table) unpark(w *lockWaiter) {
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	delete(t.waits, waitKey{client: w.req.Owner.Client, token: w.token})
}

// retry gives the waits on ino, in arrival order, the locks that no
// longer conflict: each wait is tried once per change. It returns their
// replies; mu held.
func (t *Table) retry(ino uint64, f *fileLocks) []func() {
	var replies []func()
	for i := 0; i < len(f.waiters); {
		w := f.waiters[i]
		if _, busy := f.conflict(&w.req); busy || t.graceHolds(&w.req) {
			i++
			continue
		}
		f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
		t.unpark(w)
		f.apply(&w.req)
		if s := t.sessions[w.req.Owner.Client]; s != nil {
			s.lastSeen = t.now()
		}
		t.recount(w.req.Owner.Client, ino, f)
		replies = append(replies, func() { w.reply(0) })
	}
	return replies
}

// Release removes every lock of owner on ino of one kind (POSIX or
// flock): what closing a file does.
func (t *Table) Release(ino uint64, owner Owner, flock bool) {
	t.Set(Request{Ino: ino, Owner: owner, Type: Unlock, Start: 0, End: EOF, Flock: flock})
}

// Heartbeat marks client as alive and reports whether it lost locks
// since it was last heard from, and how many it holds.
func (t *Table) Heartbeat(client ClientID) (lost bool, held int) {
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
func (t *Table) dropIdle(client ClientID) {
	if s := t.sessions[client]; s != nil && s.total == 0 {
		delete(t.sessions, client)
	}
}

// ReleaseClient removes every lock and wait of client (its connections
// closed, or it went silent) and lets waiting calls of others through.
// Its own waits are answered EAGAIN. It reports whether client held
// anything.
func (t *Table) ReleaseClient(client ClientID) bool {
	t.mu.Lock()
	replies, had := t.releaseLocked(client)
	t.mu.Unlock()
	send(replies)
	return had
}

func (t *Table) releaseLocked(client ClientID) ([]func(), bool) {
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
			replies = append(replies, func() { w.reply(syscall.EAGAIN) })
		}
		replies = append(replies, t.retry(ino, f)...)
		t.forget(ino, f)
	}
	return replies, s.total > 0
}

// Expire releases the locks of every client silent for longer than the
// timeout, as of now, remembering that they lost them; it returns how
// many sessions it expired.
func (t *Table) Expire(now time.Time) int {
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
		if now.Sub(at) > 2*maxWait {
			delete(t.early, key)
		}
	}
	t.expired += uint64(n)
	t.mu.Unlock()
	send(replies)
	return n
}

// Stats returns the number of lock entries held and waits parked.
func (t *Table) Stats() (locks, waits int, expired uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range t.files {
		locks += len(f.posix) + len(f.flocks)
	}
	return locks, len(t.waits), t.expired
}

// Stop answers every wait EAGAIN (the server is closing).
func (t *Table) Stop() {
	t.mu.Lock()
	var replies []func()
	for _, w := range t.waits {
		t.unpark(w)
		if f := t.files[w.req.Ino]; f != nil {
			f.waiters = nil
		}
		replies = append(replies, func() { w.reply(syscall.EAGAIN) })
	}
	t.mu.Unlock()
	send(replies)
}

func send(replies []func()) {
	for _, r := range replies {
		r()
	}
}

// errnoOf is the errno a failed request is answered with: err's own, or
// EIO for anything that is not one.
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}

// Timeout is how long a client holding locks may stay silent before it
// loses them.
func (t *Table) Timeout() time.Duration { return t.timeout }

// Sweep is the lock sweeper's goroutine: it releases the locks of clients
// silent for longer than the timeout, until stop is closed, and then
// answers every wait EAGAIN (Stop).
func (t *Table) Sweep(stop <-chan struct{}, log *slog.Logger) {
	tick := time.NewTicker(max(t.timeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			t.mu.Lock()
			if t.graceTimer != nil {
				t.graceTimer.Stop()
			}
			t.mu.Unlock()
			t.Stop()
			return
		case now := <-tick.C:
			if n := t.Expire(now); n > 0 {
				log.Info("locks of silent clients released", "clients", n, "timeout", t.timeout)
			}
		}
	}
}
