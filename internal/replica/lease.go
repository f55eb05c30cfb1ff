package replica

// Lease reads (Config.LeaseReads): the leader serves a read from its own
// state, without a round of heartbeats, while it holds a lease, which a
// ReadIndex confirmed by a quorum grants from the moment it was sent.
//
// Why a lease is safe: with CheckQuorum, a replica that heard from the
// leader refuses to vote (or pre-vote) for anyone else until ElectionTicks
// of its ticks have passed since; a new leader needs a quorum of votes,
// and that quorum shares a replica with the quorum that confirmed the
// lease, so no new leader can exist until ElectionTicks-1 tick intervals
// after the confirming round was sent. The lease is shorter by one more
// tick, and relies on the replicas' clocks not running faster than the
// leader's by more than that margin (bounded clock drift). The lease is
// measured on the monotonic clock, which goes on while a process is
// stopped: a leader that was paused (SIGSTOP) finds its lease expired and
// falls back to ReadIndex, which a quorum that has moved on refuses.
//
// Three ways around the vote refusal are closed: a leadership transfer
// (its forced election ignores the refusal) ends the lease at once and no
// lease is granted while one is pending; a membership change ends the
// lease; and a replica that (re)starts refuses votes itself for one
// election timeout, as if it had just heard from a leader, since it does
// not remember whom it heard from before.

import (
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// leaseDuration is how long a quorum's confirmation keeps the lease; 0
// when leases are off or the election timeout is too short for one.
func (c *Config) leaseDuration() time.Duration {
	if !c.LeaseReads || c.ElectionTicks < 3 {
		return 0
	}
	return time.Duration(c.ElectionTicks-2) * c.TickInterval
}

// leaseHeld says whether this replica may answer reads from its own state
// now: it leads, holds an unexpired lease, has applied its own term's
// first entry (so its commit index is the group's), and no leadership
// transfer is pending. On the raft goroutine.
func (n *Node) leaseHeld(now time.Time) bool {
	if n.role != raft.StateLeader || !now.Before(n.leaseUntil) || n.noopTerm != n.st.hs.Term {
		return false
	}
	return n.rn.BasicStatus().LeadTransferee == raft.None
}

// readUnderLease answers the waiting reads from the local state once it
// has applied the commit index, if the lease is held. On the raft
// goroutine.
func (n *Node) readUnderLease() bool {
	if !n.leaseHeld(time.Now()) {
		return false
	}
	n.confirmed = append(n.confirmed, &readBatch{index: n.rn.BasicStatus().Commit, waiters: n.reads})
	n.reads = nil
	n.m.leaseReads.Inc()
	n.answerReads()
	return true
}

// renewLease starts a ReadIndex round with no reads waiting when the
// lease has less than half its length left, so that reads keep finding
// it held. On the raft goroutine, at each tick.
func (n *Node) renewLease() {
	d := n.cfg.leaseDuration()
	if d == 0 || n.batch != nil || n.role != raft.StateLeader || n.noopTerm != n.st.hs.Term {
		return
	}
	if time.Until(n.leaseUntil) < d/2 {
		n.startReadBatch(nil)
	}
}

// leaseConfirmed extends the lease after batch b's ReadIndex was
// confirmed by a quorum, from the time it was sent.
func (n *Node) leaseConfirmed(b *readBatch) {
	d := n.cfg.leaseDuration()
	if d == 0 || n.role != raft.StateLeader || b.term != n.st.hs.Term || b.id <= n.noLeaseUpTo ||
		n.rn.BasicStatus().LeadTransferee != raft.None {
		return
	}
	if until := b.sent.Add(d); until.After(n.leaseUntil) {
		n.leaseUntil = until
	}
}

// endLease ends the lease now; confirmations of rounds sent before this
// call grant none.
func (n *Node) endLease() {
	n.leaseUntil = time.Time{}
	n.noLeaseUpTo = n.readSeq
}

// refuseVote says whether a vote request is to be dropped because this
// replica started less than an election timeout ago (lease reads only).
func (n *Node) refuseVote(m pb.Message) bool {
	if n.cfg.leaseDuration() == 0 || (m.Type != pb.MsgVote && m.Type != pb.MsgPreVote) {
		return false
	}
	return time.Since(n.started) < time.Duration(n.cfg.ElectionTicks)*n.cfg.TickInterval
}
