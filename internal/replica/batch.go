package replica

// Proposals batched into shared entries: every proposal the raft goroutine
// takes in one turn goes into one Raft entry (or a few, past
// maxBatchBytes), so that Raft's per-entry work (log record, message
// encoding, the followers' decoding and appends) is paid once per batch
// rather than once per proposal.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
)

// An entry's data starts with a 16-byte proposal id: epoch, then
// sequence number, both little-endian uint64, then the state machine's
// command. A batch entry starts with 8 zero bytes instead (no start's
// epoch is 0), then the proposers' epoch, then the commands:
//
//	0 uint64 | epoch uint64 | count uvarint | count × (seq uvarint | len uvarint | command)
const batchHeaderSize = 16

// maxBatchBytes bounds the commands put into one batch entry, well below
// the 1 MiB of entries a message carries.
const maxBatchBytes = 256 << 10

// errBadBatch reports a batch entry that does not decode.
var errBadBatch = errors.New("replica: malformed batch entry")

// queued is a proposal taken by the raft goroutine and not yet handed to
// Raft: owned by the raft goroutine.
type queued struct {
	seq  uint64
	data []byte
	p    *proposal
}

// queueProposal takes a proposal for the next flush; on the raft
// goroutine.
func (n *Node) queueProposal(q queued) {
	n.queue = append(n.queue, q)
	n.queueBytes += len(q.data)
	if n.queueBytes >= maxBatchBytes {
		n.flushProposals()
	}
}

// proposeQueued hands the queued proposals to Raft at the end of a turn
// of the raft goroutine, unless this replica's last entries are still
// being synced: then they wait for the sync, gathering the proposals that
// arrive meanwhile into the same entry, and go as soon as the syncer
// reports it done (or once they reach maxBatchBytes). One entry per
// fsync, as many proposals in it as the disk's pace allows: Raft's
// per-entry work on every replica is paid once per fsync, not once per
// turn of a loop that no longer waits for the disk. The acknowledgements
// and applies of entries already sent go on meanwhile.
func (n *Node) proposeQueued() {
	if n.appending == 0 || n.role != raft.StateLeader {
		n.flushProposals()
	}
}

// flushProposals hands the queued proposals to Raft: one as a plain entry,
// several as one batch entry. On the raft goroutine.
func (n *Node) flushProposals() {
	if len(n.queue) == 0 {
		return
	}
	q := n.queue
	n.queue, n.queueBytes = n.queue[:0], 0
	defer clear(q)
	if n.role != raft.StateLeader {
		for _, x := range q {
			x.p.deliver(result{err: &NotLeaderError{Leader: n.lead}})
		}
		return
	}
	var data []byte
	if len(q) == 1 {
		data = make([]byte, 16+len(q[0].data))
		binary.LittleEndian.PutUint64(data, n.epoch)
		binary.LittleEndian.PutUint64(data[8:], q[0].seq)
		copy(data[16:], q[0].data)
	} else {
		size := batchHeaderSize + binary.MaxVarintLen32
		for _, x := range q {
			size += 2*binary.MaxVarintLen64 + len(x.data)
		}
		data = make([]byte, 16, size)
		binary.LittleEndian.PutUint64(data[8:], n.epoch)
		data = binary.AppendUvarint(data, uint64(len(q)))
		for _, x := range q {
			data = binary.AppendUvarint(data, x.seq)
			data = binary.AppendUvarint(data, uint64(len(x.data)))
			data = append(data, x.data...)
		}
	}
	now := time.Now()
	for _, x := range q {
		x.p.start = now
		n.pending[x.seq] = x.p
	}
	n.m.proposals.Add(float64(len(q)))
	n.m.perEntry.Observe(float64(len(q)))
	if err := n.rn.Propose(data); err != nil {
		for _, x := range q {
			delete(n.pending, x.seq)
			x.p.deliver(result{err: fmt.Errorf("propose: %w", err)})
		}
	}
}

// isBatch says whether an entry's data is a batch entry.
func isBatch(data []byte) bool {
	return len(data) >= batchHeaderSize && binary.LittleEndian.Uint64(data) == 0
}

// eachInBatch calls f for each command of a batch entry, in order, with
// the proposers' epoch. The commands are slices of data.
func eachInBatch(data []byte, f func(epoch, seq uint64, cmd []byte)) error {
	epoch := binary.LittleEndian.Uint64(data[8:])
	b := data[batchHeaderSize:]
	count, k := binary.Uvarint(b)
	if k <= 0 || count > uint64(len(b)) {
		return errBadBatch
	}
	b = b[k:]
	for range count {
		seq, k := binary.Uvarint(b)
		if k <= 0 {
			return errBadBatch
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return errBadBatch
		}
		b = b[k:]
		f(epoch, seq, b[:l:l])
		b = b[l:]
	}
	if len(b) != 0 {
		return errBadBatch
	}
	return nil
}
