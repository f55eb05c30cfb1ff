package locks

import (
	"fmt"
	"syscall"
	"time"
)

// The grace period, as NFS has it. A table that starts again after its
// locks were lost (a replicated partition's new leader, whose lock table
// was not the old leader's) holds no lock of what its clients were
// granted before. For a grace period after Restart it grants only
// reclaims (Request.Reclaim): the locks clients take again, which they do
// at their next heartbeat. Any other lock that would be taken is refused
// (SETLK: EAGAIN), or waits for the end of the period (SETLKW), and GETLK
// that finds no conflict cannot tell that none exists (ErrGrace), since a
// lock not reclaimed yet may conflict. Unlocking is always allowed. When
// the period ends the waits are tried again, in arrival order.

// ErrGrace refuses, during the grace period, a lock that is not a
// reclaim; callers test it with errors.Is (it is EAGAIN for Set).
var ErrGrace = fmt.Errorf("locks are being reclaimed after a failover or restart: %w", syscall.EAGAIN)

// Restart drops every lock and wait (the waits are answered EAGAIN, and
// no client is told it lost its locks: each takes them again) and starts
// a grace period of grace (none if not positive).
func (t *Table) Restart(grace time.Duration) {
	t.mu.Lock()
	var replies []func()
	for _, w := range t.waits {
		t.unpark(w)
		replies = append(replies, func() { w.reply(syscall.EAGAIN) })
	}
	clear(t.files)
	clear(t.sessions)
	clear(t.lost)
	clear(t.early)
	if t.graceTimer != nil {
		t.graceTimer.Stop()
		t.graceTimer = nil
	}
	t.graceUntil = time.Time{}
	if grace > 0 {
		t.graceUntil = t.now().Add(grace)
		t.graceTimer = time.AfterFunc(grace, t.endGrace)
	}
	t.mu.Unlock()
	send(replies)
}

// Grace returns how long the grace period lasts still (0: none).
func (t *Table) Grace() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.graceLeft()
}

// graceLeft is Grace with mu held.
func (t *Table) graceLeft() time.Duration {
	if t.graceUntil.IsZero() {
		return 0
	}
	left := t.graceUntil.Sub(t.now())
	if left <= 0 {
		return 0
	}
	return left
}

// graceHolds reports whether the grace period refuses r: a lock taken
// (not a reclaim, not an unlock) before the period ends; mu held.
func (t *Table) graceHolds(r *Request) bool {
	return !r.Reclaim && r.Type != Unlock && t.graceLeft() > 0
}

// endGrace ends the grace period, on its timer's goroutine, and tries
// the waits on every file again.
func (t *Table) endGrace() {
	t.mu.Lock()
	if left := t.graceLeft(); left > 0 { // the clock runs behind the timer
		t.graceTimer = time.AfterFunc(left, t.endGrace)
		t.mu.Unlock()
		return
	}
	t.graceUntil, t.graceTimer = time.Time{}, nil
	var replies []func()
	for ino, f := range t.files {
		replies = append(replies, t.retry(ino, f)...)
		t.forget(ino, f)
	}
	t.mu.Unlock()
	send(replies)
}
