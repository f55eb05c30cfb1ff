// Package replica keeps the replicas of a group identical with Raft
// (go.etcd.io/raft/v3), over Canopy's own transaction log.
//
// # Pieces
//
//   - Storage is raft.Storage over a wal.Log: one entry is one record
//     (term, entry type, payload) whose lsn is the entry's index. There is
//     no second log. The terms of all entries and the most recent entries
//     themselves are kept in memory, so the leader reads its own tail
//     without touching the disk.
//   - Node owns a raft.RawNode on one goroutine, the raft goroutine, which
//     also owns the Storage, the log and the StateMachine, and runs the
//     Ready loop with Raft's asynchronous storage writes: messages out
//     through a Transport, new entries written to the log, committed
//     entries into the StateMachine. The fsyncs run on a goroutine of
//     their own, the syncer, one fsync for every append waiting (group
//     commit), which then sends the acknowledgements that waited for
//     them; the raft goroutine goes on meanwhile. The proposals that
//     arrive while the leader's last entries are synced share one Raft
//     entry (batch.go); a leader sends its appends before its own fsync.
//     Proposals are answered once applied (futures matched by a proposal
//     id carried in the entry); reads are linearizable by ReadIndex,
//     batched so that one quorum confirmation serves every read that
//     arrived meanwhile, or answered at once under a leader lease that
//     those confirmations renew (lease.go, Config.LeaseReads). PreVote
//     and CheckQuorum are on.
//   - Snapshots are wal checkpoints of the StateMachine plus the Raft
//     metadata. A follower too far behind receives one in chunks (never
//     one frame), installs it, and the log continues after it. The log is
//     truncated behind each snapshot, keeping some entries for followers
//     a little behind.
//   - MemNetwork is an in-memory Transport for tests, with links that can
//     be cut one way or both; TCPTransport carries frames over TCP.
//
// Hard state (term, vote) is kept by wal.WriteState in the replica's
// directory; see package wal and docs/replication.md.
package replica
