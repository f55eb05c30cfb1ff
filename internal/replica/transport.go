package replica

import (
	"context"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Transport carries messages between the replicas of a group. The Node
// calls it; an implementation delivers what it carries by calling the
// receiving Node's Deliver and DeliverChunk.
type Transport interface {
	// Send hands Raft messages on for delivery to their m.To. It is called
	// on the raft goroutine and on the syncer's (acknowledgements sent
	// once durable), so it must be safe for concurrent use, and must not
	// block: a message that cannot be
	// queued is dropped, which Raft tolerates (it resends). Send must not
	// keep msgs or anything they point to past its return unless it copies
	// them: the Node may reuse the entries' memory.
	Send(msgs []pb.Message)

	// SendChunk delivers one chunk of a snapshot to replica to, blocking
	// until the link has taken it or ctx is done. It is called on the
	// snapshot goroutine, one chunk after another; an error abandons the
	// snapshot, which Raft then retries.
	SendChunk(ctx context.Context, to uint64, c Chunk) error
}

// Chunk is a piece of a snapshot on its way to a follower. A snapshot
// travels as chunks of at most Config.ChunkSize bytes, in order, each
// carrying the MsgSnap it belongs to (with the snapshot's metadata, no
// data); the follower writes them to a file and hands the MsgSnap to Raft
// once the last has arrived.
type Chunk struct {
	Msg    pb.Message // the MsgSnap: From, To, Term, Snapshot.Metadata
	Offset uint64     // of Data in the snapshot's body
	Data   []byte
	Last   bool
}
