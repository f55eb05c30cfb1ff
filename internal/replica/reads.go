package replica

import (
	"encoding/binary"
	"time"

	"go.etcd.io/raft/v3"
)

// Linearizable reads: batches of waiting readers confirmed by one
// ReadIndex round, or answered under the leader's lease.

// failReads fails the reads waiting for a batch and the batch in flight,
// and, if all, the reads whose index is confirmed too.
func (n *Node) failReads(err error, all bool) {
	for _, w := range n.reads {
		w <- err
	}
	n.reads = nil
	if n.batch != nil {
		for _, w := range n.batch.waiters {
			w <- err
		}
		n.batch = nil
	}
	if all {
		for _, b := range n.confirmed {
			for _, w := range b.waiters {
				w <- err
			}
		}
		n.confirmed = nil
	}
}

// issueRead answers the reads that arrived since the last turn under the
// lease, if it is held, or else sends one ReadIndex for all of them,
// unless one is in flight.
func (n *Node) issueRead() {
	if len(n.reads) == 0 || n.readUnderLease() || n.batch != nil {
		return
	}
	if n.lead == raft.None {
		n.failReads(ErrNoLeader, false)
		return
	}
	n.startReadBatch(n.reads)
	n.reads = nil
}

// startReadBatch sends one ReadIndex for the reads waiters.
func (n *Node) startReadBatch(waiters []chan error) {
	n.readSeq++
	n.batch = &readBatch{id: n.readSeq, issued: n.ticks, sent: time.Now(), term: n.st.hs.Term, waiters: waiters}
	var ctx [8]byte
	binary.LittleEndian.PutUint64(ctx[:], n.readSeq)
	n.rn.ReadIndex(ctx[:])
}

func (n *Node) readConfirmed(rs raft.ReadState) {
	if len(rs.RequestCtx) != 8 || n.batch == nil || binary.LittleEndian.Uint64(rs.RequestCtx) != n.batch.id {
		return
	}
	b := n.batch
	n.batch = nil
	b.index = rs.Index
	n.leaseConfirmed(b)
	n.confirmed = append(n.confirmed, b)
	n.answerReads()
}

// answerReads answers the reads whose confirmed index has been applied.
func (n *Node) answerReads() {
	k := 0
	for _, b := range n.confirmed {
		if b.index <= n.applied {
			for _, w := range b.waiters {
				w <- nil
			}
			continue
		}
		n.confirmed[k] = b
		k++
	}
	clear(n.confirmed[k:])
	n.confirmed = n.confirmed[:k]
}
