// Package server is Canopy's metadata server: one partition's namespace
// (internal/engine) made durable by the transaction log (internal/wal) and
// served over Canopy RPC (internal/rpc).
//
// Goroutines and what they own:
//
//   - the RPC readers (one per connection) decode each call's request
//     message and queue it on the bounded operation queue; a full queue
//     refuses the call at once with BUSY;
//   - the apply loop owns the engine and the retry cache: it takes the
//     queued operations in batches, applies each in order, and encodes a log
//     record for every mutation that succeeded;
//   - the committer owns the log: it appends each batch's records, syncs
//     them with one fsync (group commit), and only then encodes and sends
//     the batch's replies, so a reply always means the change is durable;
//   - the checkpointer writes checkpoint files that the apply loop encoded,
//     after which the committer drops the log segments they cover.
//
// A read is answered after every mutation applied before it is durable, so
// no reply ever shows state that a crash could take back.
package server
