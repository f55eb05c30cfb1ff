package replica

// The Node's methods other goroutines call: proposals, reads, membership changes, status and stopping; each hands its work to the raft goroutine.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// submit runs f on the raft goroutine.
func (n *Node) submit(ctx context.Context, f func()) error {
	select {
	case n.reqc <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return ErrStopped
	}
}

// wait waits for the answer to p.
func (n *Node) wait(ctx context.Context, p *proposal) (any, error) {
	select {
	case r := <-p.ch:
		return r.val, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.donec:
		return nil, ErrStopped
	}
}

// Propose replicates data, an entry for the StateMachine, and returns what
// its Apply returned once a quorum holds it and this replica applied it.
// At a replica that is not the leader it fails at once with a
// *NotLeaderError. If it fails with ErrLeadershipLost or a context error,
// the entry may still be applied. data is not copied: the caller must not
// change it afterwards.
func (n *Node) Propose(ctx context.Context, data []byte) (any, error) {
	seq := n.seq.Add(1)
	p := &proposal{ch: make(chan result, 1)}
	err := n.submit(ctx, func() {
		if n.role != raft.StateLeader {
			p.deliver(result{err: &NotLeaderError{Leader: n.lead}})
			return
		}
		n.queueProposal(queued{seq: seq, data: data, p: p})
	})
	if err != nil {
		return nil, err
	}
	return n.wait(ctx, p)
}

// Read waits until this replica's state machine reflects every entry
// committed before Read was called, so that what the caller then reads
// from it is linearizable. Reads arriving together share one ReadIndex:
// one round of heartbeats confirms, for all of them, that the leader is
// still the leader. A replica that is not the leader asks the leader for
// the index. If leadership changes while the read waits, or no quorum
// confirms it within an election timeout, Read fails and the caller
// should retry, possibly elsewhere.
func (n *Node) Read(ctx context.Context) error {
	ch := make(chan error, 1)
	if err := n.submit(ctx, func() { n.reads = append(n.reads, ch) }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return ErrStopped
	}
}

// changeConf proposes a membership change at the leader and waits until it
// is applied, retrying while Raft refuses it for another pending one.
// info is carried in the change's context, after the proposal id, for a
// MembershipObserver.
func (n *Node) changeConf(ctx context.Context, cc pb.ConfChangeV2, info []byte) error {
	for {
		seq := n.seq.Add(1)
		ctxb := make([]byte, 16+len(info))
		binary.LittleEndian.PutUint64(ctxb, n.epoch)
		binary.LittleEndian.PutUint64(ctxb[8:], seq)
		copy(ctxb[16:], info)
		cc.Context = ctxb
		p := &proposal{ch: make(chan result, 1), start: time.Now()}
		err := n.submit(ctx, func() {
			if n.role != raft.StateLeader {
				p.deliver(result{err: &NotLeaderError{Leader: n.lead}})
				return
			}
			n.pending[seq] = p
			n.confQueue = append(n.confQueue, seq)
			if err := n.rn.ProposeConfChange(cc); err != nil {
				delete(n.pending, seq)
				n.dequeueConf(seq)
				p.deliver(result{err: fmt.Errorf("propose membership change: %w", err)})
			}
		})
		if err != nil {
			return err
		}
		_, err = n.wait(ctx, p)
		if !errors.Is(err, errConfChangeRefused) {
			return err
		}
		select {
		case <-time.After(n.cfg.TickInterval):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// AddLearner adds replica id as a learner: it receives the log (or a
// snapshot) but does not vote, until Promote.
func (n *Node) AddLearner(ctx context.Context, id uint64) error {
	return n.AddLearnerWith(ctx, id, nil)
}

// AddLearnerWith is AddLearner, passing info (such as the new replica's
// addresses) to every replica's MembershipObserver with the change.
func (n *Node) AddLearnerWith(ctx context.Context, id uint64, info []byte) error {
	return n.changeConf(ctx, pb.ConfChangeV2{Changes: []pb.ConfChangeSingle{{Type: pb.ConfChangeAddLearnerNode, NodeID: id}}}, info)
}

// Promote makes learner id a voter.
func (n *Node) Promote(ctx context.Context, id uint64) error {
	return n.changeConf(ctx, pb.ConfChangeV2{Changes: []pb.ConfChangeSingle{{Type: pb.ConfChangeAddNode, NodeID: id}}}, nil)
}

// Remove removes replica id from the group.
func (n *Node) Remove(ctx context.Context, id uint64) error {
	return n.changeConf(ctx, pb.ConfChangeV2{Changes: []pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode, NodeID: id}}}, nil)
}

// TransferLeadership asks the leader (this replica) to hand leadership to
// replica to, and waits until this replica sees to as leader.
func (n *Node) TransferLeadership(ctx context.Context, to uint64) error {
	errc := make(chan error, 1)
	if err := n.submit(ctx, func() {
		if n.role != raft.StateLeader {
			errc <- &NotLeaderError{Leader: n.lead}
			return
		}
		n.endLease()
		n.rn.TransferLeader(to)
		errc <- nil
	}); err != nil {
		return err
	}
	if err := <-errc; err != nil {
		return err
	}
	for {
		st, err := n.Status(ctx)
		if err != nil {
			return err
		}
		if st.Leader == to {
			return nil
		}
		select {
		case <-time.After(n.cfg.TickInterval):
		case <-ctx.Done():
			return fmt.Errorf("transfer leadership to %d: %w", to, ctx.Err())
		}
	}
}

// Campaign makes this replica start an election now.
func (n *Node) Campaign(ctx context.Context) error {
	errc := make(chan error, 1)
	if err := n.submit(ctx, func() { errc <- n.rn.Campaign() }); err != nil {
		return err
	}
	return <-errc
}

// Status is a replica's view of its group.
type Status struct {
	ID, Leader       uint64
	Role             string
	Term, Vote       uint64
	Commit           uint64
	Applied, Last    uint64
	SnapshotIndex    uint64
	Voters, Learners []uint64
	// Followers, at the leader only: each one's match index and lag.
	Followers map[uint64]FollowerStatus
}

// FollowerStatus is the leader's view of one follower.
type FollowerStatus struct {
	Match, Lag uint64
	State      string
	Learner    bool
	Active     bool // heard from within the last election timeout (CheckQuorum's view)
}

// Status returns the replica's current view of its group.
func (n *Node) Status(ctx context.Context) (Status, error) {
	ch := make(chan Status, 1)
	if err := n.submit(ctx, func() { ch <- n.status() }); err != nil {
		return Status{}, err
	}
	select {
	case s := <-ch:
		return s, nil
	case <-n.donec:
		return Status{}, ErrStopped
	}
}

func (n *Node) status() Status {
	bs := n.rn.BasicStatus()
	s := Status{
		ID: n.id, Leader: bs.Lead, Role: bs.RaftState.String(),
		Term: bs.Term, Vote: bs.Vote, Commit: bs.Commit, Applied: n.applied, Last: n.st.last,
		SnapshotIndex: n.st.snap.Index,
		Voters:        append([]uint64(nil), n.confState.Voters...),
		Learners:      append([]uint64(nil), n.confState.Learners...),
	}
	if bs.RaftState == raft.StateLeader {
		s.Followers = make(map[uint64]FollowerStatus)
		n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id != n.id {
				s.Followers[id] = FollowerStatus{Match: pr.Match, Lag: s.Last - min(s.Last, pr.Match),
					State: pr.State.String(), Learner: pr.IsLearner, Active: pr.RecentActive}
			}
		})
	}
	return s
}

// Deliver hands a message from another replica to this one. It never
// blocks: when the replica is too far behind, the message is dropped and
// Raft resends.
func (n *Node) Deliver(m pb.Message) {
	select {
	case n.recvc <- m:
	default:
	}
}

// Stop stops the replica: the raft goroutine ends, waiters fail with
// ErrStopped, snapshot streams end, and the log is closed. It returns the
// error that stopped the replica earlier, if a storage failure did.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() { close(n.stopc) })
	<-n.donec
	n.streams.Wait()
	n.recv.close()
	if n.err != nil && !errors.Is(n.err, ErrStopped) {
		return n.err
	}
	return nil
}

// Done is closed when the raft goroutine has ended.
func (n *Node) Done() <-chan struct{} { return n.donec }

// pause stops the raft goroutine until resume is called, as a SIGSTOP
// would: no ticks, no messages handled (those arriving queue up, and past
// the queue's size are dropped). For tests.
func (n *Node) pause() (resume func()) {
	ch := make(chan struct{})
	select {
	case n.pausec <- ch:
	case <-n.donec:
	}
	return func() { close(ch) }
}
