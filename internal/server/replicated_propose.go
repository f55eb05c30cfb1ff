package server

// Mutations proposed without waiting, and their replies: the proposer
// hands each record to the replica Node, whose callback queues the
// outcome for the answerer goroutine, which replies.

import (
	"sync"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// propose proposes rec, the log record of o, and has o answered once its
// entry is applied (or the proposal failed) by the answerer goroutine;
// on the proposer or reader goroutine. o.call is nil for a proposal no
// one waits for. The slots bound the proposals in flight.
func (r *replicated) propose(o *op, rec *pb.LogRecord) {
	data, err := proto.Marshal(rec)
	if err != nil { // cannot happen for a well-formed message
		if o.call != nil {
			o.call.Reply(uint32(syscall.EIO), nil)
		}
		return
	}
	r.slots <- struct{}{}
	r.inflight.Add(1)
	r.node.ProposeDecoded(data, rec, func(v any, err error) { r.answers.add(answer{o: o, val: v, err: err}) })
}

// answerLoop is the answerer goroutine: it replies to the calls whose
// proposals were answered, in the order they were, until quit is closed.
func (r *replicated) answerLoop(quit <-chan struct{}) {
	for {
		select {
		case <-r.answers.wake:
		case <-quit:
			return
		}
		batch := r.answers.take()
		for _, a := range batch {
			r.answered(a)
			<-r.slots
			r.inflight.Done()
		}
		r.answers.recycle(batch)
	}
}

// answered replies to the call of a proposal answered by the Node.
func (r *replicated) answered(a answer) {
	o := a.o
	if o.call == nil {
		return
	}
	if a.err != nil {
		r.replyErr(o.call, a.err)
		return
	}
	res, _ := a.val.(applied)
	o.status, o.reply = res.status, res.reply
	if o.scope() != nil {
		r.state.mu.Lock()
		r.state.sm.showReply(o, r.state.sm.grants)
		r.state.mu.Unlock()
	}
	r.reply(o)
}

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
