package server

import "sync"

// answer is a proposal answered by the replica Node: what its entry's
// Apply returned, or why it failed.
type answer struct {
	o   *op
	val any
	err error
}

// answerQueue carries answers from the raft goroutine, which must not
// wait, to the answerer goroutine, which replies to the calls (reply
// encoding, the audit log, the connection's writer). One wake covers
// every answer added since the last take; q is guarded by mu.
type answerQueue struct {
	mu    sync.Mutex
	q     []answer
	spare []answer // answerer goroutine
	wake  chan struct{}
}

// add queues a; on the raft goroutine.
func (a *answerQueue) add(x answer) {
	a.mu.Lock()
	a.q = append(a.q, x)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// take returns every answer queued; on the answerer goroutine.
func (a *answerQueue) take() []answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.q
	a.q = a.spare[:0]
	a.spare = nil
	return q
}

// recycle keeps batch, taken and answered, for a later take; on the
// answerer goroutine.
func (a *answerQueue) recycle(batch []answer) {
	clear(batch)
	a.mu.Lock()
	a.spare = batch[:0]
	a.mu.Unlock()
}
