// Package server is Canopy's metadata server: one partition's namespace
// (internal/engine) made durable by the transaction log (internal/wal) and
// served over Canopy RPC (internal/rpc).
//
// A call goes through four stages, each a type that holds what its
// goroutine owns, handing on to the next over a channel (stages.go has
// the picture):
//
//   - decode and queue (intake, intake.go), on the RPC readers, one per
//     connection: decode the request and queue it on one of two bounded
//     queues, reads or writes (mutations); a full queue refuses the call
//     at once with BUSY. NULL, VOLUME and the lock calls are answered
//     here (file locks are kept by internal/locks, outside the log);
//   - apply (applier, apply.go), the apply loop's goroutine, which owns the
//     state machine (stateMachine, state.go: engine, retry cache, open
//     files per client): it takes the queued operations in batches,
//     applies each in order, and encodes a log record for every mutation
//     that succeeded; log replay at start applies the records through the
//     same state machine;
//   - commit (committer, commit.go), the committer's goroutine, which owns
//     the log: it appends each batch's records and syncs them with one
//     fsync (group commit); the checkpointer's goroutine writes the
//     checkpoints the apply loop encoded, after which the committer drops
//     the log segments they cover;
//   - reply (replier, reply.go), on the committer's goroutine once the
//     batch is durable: it encodes and sends the batch's replies, so a
//     reply always means the change is durable.
//
// Two more goroutines run beside them: the lock sweeper (locks.Table.Sweep)
// and the memory releaser (memory.go).
//
// A read is answered after every mutation applied before it is durable, so
// no reply ever shows state that a crash could take back.
package server
