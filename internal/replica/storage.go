package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/canopyfs/canopy/internal/wal"
)

// An entry is stored as one wal record whose lsn is the entry's index:
//
//	term uint64 | type byte | data
//
// term is little-endian; type is the raftpb.EntryType.
const entryHeaderSize = 9

// Defaults for the in-memory window of recent entries.
const (
	windowEntries = 8192
	windowBytes   = 64 << 20
)

// errStop ends a wal.Replay early.
var errStop = errors.New("replica: stop replay")

// termRun says that the entries from index first on, up to the next run,
// carry term.
type termRun struct{ first, term uint64 }

// Storage is the raft.Storage of one replica, over its wal.Log: entry
// index = lsn. It keeps the term of every entry it holds (as runs, a few
// bytes per term) and the most recent entries themselves, so that the
// leader's reads of its own tail, to send it to followers, do not touch
// the disk; older entries are read back from the log.
//
// Storage is owned by the Node's raft goroutine: raft calls it from inside
// RawNode methods, and the Node appends and compacts on the same
// goroutine. The syncer goroutine only fsyncs the log under it
// (wal.Log.SyncFlushed), which the log allows beside its owner's writes.
type Storage struct {
	log *wal.Log

	hs   pb.HardState
	snap pb.SnapshotMetadata // the newest snapshot

	// Entries (dummy, last] are available; dummy is the index before the
	// first, whose term only is known (the snapshot's, or an entry kept).
	dummy, dummyTerm uint64
	last             uint64
	terms            []termRun // of the entries (dummy, last], in order

	win      []pb.Entry // the entries (last-len(win), last]
	winBytes int

	buf  []byte   // encoding buffer for append, reused
	recs [][]byte // the records in buf, reused
}

var _ raft.Storage = (*Storage)(nil)

// openStorage builds the Storage of log, whose newest snapshot is snap (the
// zero value if there is none) and whose saved state is st. If the log does
// not continue from the snapshot, which happens when a crash interrupted
// the Reset that follows the install of a snapshot, it resets the log.
func openStorage(log *wal.Log, snap pb.SnapshotMetadata, st wal.State) (*Storage, error) {
	s := &Storage{log: log, snap: snap}
	first, last := log.FirstLSN(), log.LastLSN()
	switch {
	case snap.Index == 0 && first > 1:
		return nil, fmt.Errorf("log starts at %d with no snapshot: %w", first, wal.ErrCorrupt)
	case snap.Index == 0:
		s.dummy = 0
	case last < snap.Index || first > snap.Index+1:
		// Nothing to keep: the log ends before the snapshot or starts
		// after it.
		if err := log.Reset(snap.Index + 1); err != nil {
			return nil, fmt.Errorf("reset log to follow snapshot %d: %w", snap.Index, err)
		}
		s.dummy, s.dummyTerm = snap.Index, snap.Term
	case first == snap.Index+1:
		s.dummy, s.dummyTerm = snap.Index, snap.Term
	default:
		// The log holds the snapshot's index and more before it; its
		// oldest entry is the dummy, its term read by load.
		s.dummy = first
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	if snap.Index > 0 {
		t, err := s.Term(snap.Index)
		if err != nil {
			return nil, fmt.Errorf("term of snapshot index %d: %w", snap.Index, err)
		}
		if t != snap.Term {
			// Entries of an older term that the snapshot replaced: the
			// crash came between installing it and resetting the log.
			if err := log.Reset(snap.Index + 1); err != nil {
				return nil, fmt.Errorf("reset log to follow snapshot %d: %w", snap.Index, err)
			}
			s.dummy, s.dummyTerm = snap.Index, snap.Term
			if err := s.load(); err != nil {
				return nil, err
			}
		}
	}
	s.hs = pb.HardState{Term: st.Term, Vote: st.Vote, Commit: max(st.Commit, snap.Index)}
	if s.hs.Commit > s.last {
		return nil, fmt.Errorf("commit index %d past the last entry %d: %w", s.hs.Commit, s.last, wal.ErrCorrupt)
	}
	return s, nil
}

// load reads the log after s.dummy, filling the term runs and the window.
// If s.dummy is an entry of the log, its term becomes s.dummyTerm.
func (s *Storage) load() error {
	s.terms, s.win, s.winBytes = nil, nil, 0
	s.last = s.dummy
	after := s.dummy
	if s.dummy >= s.log.FirstLSN() {
		after = s.dummy - 1
	}
	err := s.log.Replay(after, func(lsn uint64, rec []byte) error {
		e, err := decodeEntry(lsn, rec)
		if err != nil {
			return err
		}
		if lsn == s.dummy {
			s.dummyTerm = e.Term
			return nil
		}
		e.Data = append([]byte(nil), e.Data...)
		s.push(e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	return nil
}

// push adds e, the entry after s.last, to the term runs and the window.
func (s *Storage) push(e pb.Entry) {
	if n := len(s.terms); n == 0 || s.terms[n-1].term != e.Term {
		s.terms = append(s.terms, termRun{first: e.Index, term: e.Term})
	}
	s.last = e.Index
	s.win = append(s.win, e)
	s.winBytes += len(e.Data)
	k := 0
	for len(s.win)-k > 1 && (len(s.win)-k > windowEntries || s.winBytes > windowBytes) {
		s.winBytes -= len(s.win[k].Data)
		k++
	}
	if k > 0 {
		s.win = s.win[k:]
	}
}

// decodeEntry decodes the record of entry index.
func decodeEntry(index uint64, rec []byte) (pb.Entry, error) {
	if len(rec) < entryHeaderSize {
		return pb.Entry{}, fmt.Errorf("entry %d: record of %d bytes: %w", index, len(rec), wal.ErrCorrupt)
	}
	return pb.Entry{
		Index: index,
		Term:  binary.LittleEndian.Uint64(rec),
		Type:  pb.EntryType(rec[8]),
		Data:  rec[entryHeaderSize:],
	}, nil
}

// InitialState implements raft.Storage.
func (s *Storage) InitialState() (pb.HardState, pb.ConfState, error) {
	return s.hs, s.snap.ConfState, nil
}

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) { return s.dummy + 1, nil }

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) { return s.last, nil }

// Term implements raft.Storage.
func (s *Storage) Term(i uint64) (uint64, error) {
	switch {
	case i < s.dummy:
		return 0, raft.ErrCompacted
	case i == s.dummy:
		return s.dummyTerm, nil
	case i > s.last:
		return 0, raft.ErrUnavailable
	}
	k := sort.Search(len(s.terms), func(k int) bool { return s.terms[k].first > i })
	return s.terms[k-1].term, nil
}

// Entries implements raft.Storage: the entries [lo, hi), as many as fit in
// maxSize bytes but at least one.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]pb.Entry, error) {
	if lo <= s.dummy {
		return nil, raft.ErrCompacted
	}
	if hi > s.last+1 || lo > hi {
		return nil, fmt.Errorf("entries [%d, %d) outside (%d, %d]", lo, hi, s.dummy, s.last)
	}
	if lo == hi {
		return nil, nil
	}
	if winFirst := s.last + 1 - uint64(len(s.win)); lo >= winFirst {
		return limitSize(s.win[lo-winFirst:hi-winFirst:hi-winFirst], maxSize), nil
	}
	var ents []pb.Entry
	var size uint64
	err := s.log.Replay(lo-1, func(lsn uint64, rec []byte) error {
		if lsn >= hi {
			return errStop
		}
		e, err := decodeEntry(lsn, rec)
		if err != nil {
			return err
		}
		size += uint64(e.Size())
		if len(ents) > 0 && size > maxSize {
			return errStop
		}
		e.Data = append([]byte(nil), e.Data...)
		ents = append(ents, e)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, fmt.Errorf("read entries [%d, %d): %w", lo, hi, err)
	}
	return ents, nil
}

// limitSize returns the longest prefix of ents within maxSize bytes, and at
// least one entry.
func limitSize(ents []pb.Entry, maxSize uint64) []pb.Entry {
	if len(ents) == 0 {
		return ents
	}
	size := uint64(ents[0].Size())
	for k := 1; k < len(ents); k++ {
		size += uint64(ents[k].Size())
		if size > maxSize {
			return ents[:k]
		}
	}
	return ents
}

// Snapshot implements raft.Storage. The snapshot carries its metadata
// only: its data is the checkpoint file, which the Node streams to the
// follower in chunks.
func (s *Storage) Snapshot() (pb.Snapshot, error) {
	if s.snap.Index == 0 {
		return pb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	return pb.Snapshot{Metadata: s.snap}, nil
}

// append writes ents to the log, replacing any entries from ents[0].Index
// on, without syncing.
func (s *Storage) append(ents []pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	first := ents[0].Index
	if first <= s.dummy {
		return fmt.Errorf("append entry %d at or before the first kept %d", first, s.dummy)
	}
	if first <= s.last {
		if err := s.truncateAfter(first - 1); err != nil {
			return err
		}
	}
	if first != s.last+1 {
		return fmt.Errorf("append entry %d after %d leaves a gap", first, s.last)
	}
	s.buf = s.buf[:0]
	for _, e := range ents {
		s.buf = binary.LittleEndian.AppendUint64(s.buf, e.Term)
		s.buf = append(s.buf, byte(e.Type))
		s.buf = append(s.buf, e.Data...)
	}
	s.recs = s.recs[:0]
	off := 0
	for _, e := range ents {
		n := entryHeaderSize + len(e.Data)
		s.recs = append(s.recs, s.buf[off:off+n:off+n])
		off += n
	}
	if _, err := s.log.Append(s.recs...); err != nil {
		return err
	}
	for _, e := range ents {
		s.push(e)
	}
	return nil
}

// truncateAfter removes the entries after index from the log and memory.
func (s *Storage) truncateAfter(index uint64) error {
	if err := s.log.TruncateAfter(index); err != nil {
		return err
	}
	k := sort.Search(len(s.terms), func(k int) bool { return s.terms[k].first > index })
	s.terms = s.terms[:k]
	if winFirst := s.last + 1 - uint64(len(s.win)); index+1 > winFirst {
		// A fresh slice: entries handed to raft before must not change.
		s.win = append([]pb.Entry(nil), s.win[:index+1-winFirst]...)
	} else {
		s.win = nil
	}
	s.winBytes = 0
	for _, e := range s.win {
		s.winBytes += len(e.Data)
	}
	s.last = index
	return nil
}

// sync makes the appended entries durable.
func (s *Storage) sync() error { return s.log.Sync() }

// setSnapshot records a snapshot taken (and made durable) at meta.Index.
func (s *Storage) setSnapshot(meta pb.SnapshotMetadata) { s.snap = meta }

// compact drops the entries at and before index from memory and, whole
// segments at a time, from the log. index must be at most the snapshot's.
func (s *Storage) compact(index uint64) error {
	if index <= s.dummy {
		return nil
	}
	if index > s.snap.Index || index > s.last {
		return fmt.Errorf("compact to %d past snapshot %d or last entry %d", index, s.snap.Index, s.last)
	}
	t, err := s.Term(index)
	if err != nil {
		return err
	}
	if err := s.log.TruncateBefore(index); err != nil {
		return err
	}
	// Keep the runs from the one holding index+1 on.
	k := sort.Search(len(s.terms), func(k int) bool { return s.terms[k].first > index })
	switch {
	case index == s.last:
		s.terms = nil
	case k < len(s.terms) && s.terms[k].first == index+1:
		s.terms = s.terms[k:]
	default:
		s.terms = s.terms[k-1:]
		s.terms[0].first = index + 1
	}
	if winFirst := s.last + 1 - uint64(len(s.win)); index >= winFirst {
		drop := index + 1 - winFirst
		for _, e := range s.win[:drop] {
			s.winBytes -= len(e.Data)
		}
		s.win = s.win[drop:]
	}
	s.dummy, s.dummyTerm = index, t
	return nil
}

// installSnapshot replaces the whole log by an empty one following the
// snapshot meta, which is durable already.
func (s *Storage) installSnapshot(meta pb.SnapshotMetadata) error {
	if err := s.log.Reset(meta.Index + 1); err != nil {
		return err
	}
	s.snap = meta
	s.dummy, s.dummyTerm, s.last = meta.Index, meta.Term, meta.Index
	s.terms, s.win, s.winBytes = nil, nil, 0
	if s.hs.Commit < meta.Index {
		s.hs.Commit = meta.Index
	}
	return nil
}
