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
// starting at 1 in an empty log. Recovery is OpenCheckpoint, to load the
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
//     appends from there. A last segment whose header is torn is rewritten
//     empty, keeping its name so that LSNs continue from it.
//   - Damage anywhere else, in any segment but the last, or a segment whose
//     first lsn does not follow on from the segment before it, means
//     records that had been made durable are gone. Open returns an error
//     wrapping ErrCorrupt rather than silently dropping acknowledged data.
//
// Within the last segment the rule cannot tell a torn write from a flipped
// bit: anything after the first bad record of the last segment is cut.
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
