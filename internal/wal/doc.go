// Package wal is Canopy's transaction log: the durable, ordered record of
// every metadata mutation, and the checkpoint files that let the log be
// cut short.
//
// # Use
//
// The metadata server applies a mutation in memory on its apply goroutine,
// encodes it as a record, and hands batches of records to a commit
// goroutine, which owns the Log. The commit goroutine calls Append for each
// batch it has and then one Sync for all of them (group commit), and only
// then are the mutations acknowledged. The Log itself is synchronous and
// has no goroutines; the caller does the pipelining.
//
// A Log is owned by one goroutine at a time: Append, Sync, Replay,
// TruncateBefore and Close must not be called concurrently with one
// another. LastLSN and SyncedLSN may be called from any goroutine.
//
// Records are numbered by log sequence numbers (LSNs): consecutive, and
// starting at 1 in an empty log, or at whatever lsn Reset set. Recovery is OpenCheckpoint, to load the
// newest checkpoint taken at some lsn, followed by Replay(lsn, ...).
//
// # On-disk format
//
// The log is a series of segment files in one directory, each named
// log-<lsn of its first record, 20 decimal digits>.wal. A segment starts
// with a 12-byte header, the magic "canopywl" and a uint32 format version
// (1), followed by records:
//
//	+-----------+-----------+-----------+------------------+
//	| length    | crc       | lsn       | payload          |
//	| uint32    | uint32    | uint64    | length bytes     |
//	+-----------+-----------+-----------+------------------+
//
// Integers are little-endian. crc is the CRC-32C (Castagnoli) of the eight
// lsn bytes followed by the payload. A segment grows past
// Options.SegmentSize by at most one record before the log moves on to a
// new one; a record never spans two segments.
//
// The last segment also holds zeros written ahead of its records
// (Options.Preallocate), and the log syncs with fdatasync, so that a sync
// rewrites space the file system already holds and commits no metadata. A
// record header of sixteen zero bytes is where the records end. When the
// log moves on to a new segment, it cuts the zeros off the old one and
// syncs that first, so every segment but the last ends with its last
// record.
//
// # Recovery rule
//
// Before a new segment is created, the previous one is synced (and its
// directory entry made durable), so on disk every segment but the last is
// always complete. Open relies on this:
//
//   - Damage at the end of the last segment, a record that is cut short,
//     has an absurd length, fails its CRC or carries the wrong lsn, is a
//     torn write of records that were never synced. Open truncates the
//     segment at the last good record, logs at Warn what it cut, and
//     appends from there. The zeros written ahead end the records without
//     a warning, and are cut too: whatever follows the last record goes,
//     so that bytes of a torn write beyond a lost header are never read
//     as records once new ones are written in front of them. A last segment whose header is torn is rewritten
//     empty, keeping its name so that LSNs continue from it.
//   - Damage anywhere else, in any segment but the last, or a segment whose
//     first lsn does not follow on from the segment before it, means
//     records that had been made durable are gone. Open returns an error
//     wrapping ErrCorrupt rather than silently dropping acknowledged data.
//
// Within the last segment the rule cannot tell a torn write from a flipped
// bit: anything after the first bad record of the last segment is cut.
//
// # Use as a Raft log
//
// A Raft replica (package replica) keeps its entries here, one record per
// entry, lsn = Raft index. Three operations exist for it:
//
//   - TruncateAfter(n) removes the records after n, durably, when a new
//     leader overwrites entries a follower had from an older term. Later
//     segments are removed newest first and the directory synced, then the
//     segment holding n+1 is cut and synced: a crash part-way leaves a
//     prefix of the old log, a crash afterwards never brings the removed
//     records back.
//   - Reset(next) replaces the log by an empty one whose first record will
//     be next, after a snapshot taken at next-1 was installed. A log can
//     therefore start at any lsn: its first segment's name says which.
//   - WriteState and ReadState keep the hard state (term, vote, a commit
//     index) in a file "state" beside the segments: 44 bytes, magic
//     "canopyst", version 1, the three uint64s and a CRC-32C, written as
//     state.tmp, synced, renamed over "state" and the directory synced.
//     The state file is used rather than state records inside the log so
//     that lsns stay Raft indexes and segment removal need not carry state
//     forward; the price is two extra fsyncs when the term or vote changes
//     (an election), never per batch. The commit index stored is a lower
//     bound only: commit need not be durable for Raft's safety, and the
//     replica stores it whenever it writes the state anyway.
//
// Format compatibility: segments are unchanged (version 1), so a log
// written before these operations existed opens as it is; a directory
// without a state file simply has no hard state yet.
//
// # Checkpoints
//
// WriteCheckpoint and OpenCheckpoint keep checkpoint-<lsn, 20 digits>.ckpt
// files: a header (magic "canopyck", version, lsn), the caller's body, and
// a CRC-32C of header and body, written under a temporary name and renamed
// into place only once synced. The newest two are kept, so that a
// checkpoint found damaged falls back to the one before it; to make that
// fallback useful, truncate the log only up to the older of the two.
package wal
