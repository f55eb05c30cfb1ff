package replica

// ProposeAsync's way in: proposals are put on a queue under a mutex and
// the raft goroutine, woken once for however many arrived, takes them all
// in one turn. No goroutine waits for each proposal; its answer is a
// callback. Once the Node stops, the queue refuses new proposals, so none
// is ever left unanswered. A proposal may carry the value its command was
// encoded from, which the proposing replica applies instead of decoding
// the command again (ProposeDecoded, DecodedApplier).

import (
	"sync"

	"go.etcd.io/raft/v3"
)

// intake is the queue between ProposeAsync's callers and the raft
// goroutine; q and closed are guarded by mu.
type intake struct {
	mu     sync.Mutex
	q      []queued
	spare  []queued // the slice taken last time, for reuse; raft goroutine
	closed error    // why the Node stopped; nil while it runs
	wake   chan struct{}
}

// ProposeAsync is Propose without the wait: done is called once, with
// what the StateMachine's Apply returned or why the proposal failed. It
// runs on the raft goroutine, so it must be quick, must not block and must
// not call the Node; only when the Node has stopped is it called at once,
// on the caller's goroutine, with ErrStopped or the storage error that
// stopped it. There is no deadline: the Node answers every proposal it
// takes, when the entry is applied here, when this replica stops leading
// (ErrLeadershipLost: the entry may still be applied) or when it stops.
// data is not copied: the caller must not change it afterwards.
func (n *Node) ProposeAsync(data []byte, done func(val any, err error)) {
	n.ProposeDecoded(data, nil, done)
}

// ProposeDecoded is ProposeAsync with the value data was encoded from:
// where the StateMachine is a DecodedApplier, this replica applies the
// entry from decoded (which it must not change afterwards either) rather
// than decoding data again; every other replica decodes data.
func (n *Node) ProposeDecoded(data []byte, decoded any, done func(val any, err error)) {
	q := queued{seq: n.seq.Add(1), data: data, p: &proposal{done: done, decoded: decoded}}
	in := &n.intake
	in.mu.Lock()
	if err := in.closed; err != nil {
		in.mu.Unlock()
		done(nil, err)
		return
	}
	in.q = append(in.q, q)
	in.mu.Unlock()
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// takeIntake queues every proposal waiting in the intake for the next
// entry; on the raft goroutine.
func (n *Node) takeIntake() {
	in := &n.intake
	in.mu.Lock()
	q := in.q
	in.q = in.spare[:0]
	in.mu.Unlock()
	for _, x := range q {
		if n.role != raft.StateLeader {
			x.p.deliver(result{err: &NotLeaderError{Leader: n.lead}})
			continue
		}
		n.queueProposal(x)
	}
	clear(q)
	in.spare = q
}

// closeIntake refuses proposals from now on and fails those waiting with
// err; on the raft goroutine, as it ends.
func (n *Node) closeIntake(err error) {
	in := &n.intake
	in.mu.Lock()
	in.closed = err
	q := in.q
	in.q = nil
	in.mu.Unlock()
	for _, x := range q {
		x.p.deliver(result{err: err})
	}
}

// DecodedApplier is a StateMachine that can apply an entry proposed on
// this replica from the value its data was encoded from (ProposeDecoded),
// sparing the decode. The result must be what Apply of data would give.
type DecodedApplier interface {
	ApplyDecoded(index uint64, data []byte, decoded any) any
}

// applyCommand applies one command of the entry at index: from the value
// it was encoded from where this replica proposed it and the state
// machine can, from its bytes otherwise.
func (n *Node) applyCommand(index, epoch, seq uint64, cmd []byte) any {
	if epoch == n.epoch {
		if p := n.pending[seq]; p != nil && p.decoded != nil {
			if da, ok := n.cfg.StateMachine.(DecodedApplier); ok {
				return da.ApplyDecoded(index, cmd, p.decoded)
			}
		}
	}
	return n.cfg.StateMachine.Apply(index, cmd)
}
