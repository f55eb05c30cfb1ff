package replica

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

func openTestLog(t *testing.T, fsys vfs.FS) *wal.Log {
	t.Helper()
	l, err := wal.Open(fsys, "r", wal.Options{SegmentSize: 4 << 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// ents returns entries [from, to] of term, with some data each.
func ents(from, to, term uint64) []pb.Entry {
	var out []pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, pb.Entry{Index: i, Term: term, Data: []byte{byte(i), byte(i >> 8), 'x', 'y'}})
	}
	return out
}

func mustStorage(t *testing.T, l *wal.Log, snap pb.SnapshotMetadata) *Storage {
	t.Helper()
	s, err := openStorage(l, snap, wal.State{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStorageAppendConflictAndReopen(t *testing.T) {
	fsys := vfs.NewMem()
	l := openTestLog(t, fsys)
	s := mustStorage(t, l, pb.SnapshotMetadata{})
	if err := s.append(ents(1, 50, 1)); err != nil {
		t.Fatal(err)
	}
	// A new leader of term 2 overwrites from 31 on.
	if err := s.append(ents(31, 40, 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(); err != nil {
		t.Fatal(err)
	}
	check := func(s *Storage) {
		t.Helper()
		if last, _ := s.LastIndex(); last != 40 {
			t.Fatalf("LastIndex %d, want 40", last)
		}
		for i, want := range map[uint64]uint64{0: 0, 1: 1, 30: 1, 31: 2, 40: 2} {
			if got, err := s.Term(i); err != nil || got != want {
				t.Fatalf("Term(%d) = %d, %v; want %d", i, got, err, want)
			}
		}
		if _, err := s.Term(41); !errors.Is(err, raft.ErrUnavailable) {
			t.Fatalf("Term(41): %v", err)
		}
		es, err := s.Entries(29, 33, 1<<20)
		if err != nil || len(es) != 4 || es[1].Term != 1 || es[2].Term != 2 || es[2].Index != 31 {
			t.Fatalf("Entries(29, 33): %v, %v", es, err)
		}
		es, err = s.Entries(1, 41, 1)
		if err != nil || len(es) != 1 {
			t.Fatalf("Entries with a tiny limit: %d entries, %v; want exactly 1", len(es), err)
		}
	}
	check(s)
	// From the disk only: reopen with an empty window.
	s.win, s.winBytes = nil, 0
	check(s)
	l.Close()
	l2 := openTestLog(t, fsys)
	check(mustStorage(t, l2, pb.SnapshotMetadata{}))
}

func TestStorageCompactAndSnapshot(t *testing.T) {
	fsys := vfs.NewMem()
	l := openTestLog(t, fsys)
	s := mustStorage(t, l, pb.SnapshotMetadata{})
	if err := s.append(append(ents(1, 300, 1), ents(301, 400, 3)...)); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(); err != nil {
		t.Fatal(err)
	}
	snap := pb.SnapshotMetadata{Index: 350, Term: 3}
	s.setSnapshot(snap)
	if err := s.compact(320); err != nil {
		t.Fatal(err)
	}
	if first, _ := s.FirstIndex(); first != 321 {
		t.Fatalf("FirstIndex %d after compact(320)", first)
	}
	if _, err := s.Entries(320, 330, 1<<20); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Entries below the first: %v, want ErrCompacted", err)
	}
	if tm, err := s.Term(320); err != nil || tm != 3 {
		t.Fatalf("Term(320) = %d, %v", tm, err)
	}
	if got, err := s.Snapshot(); err != nil || got.Metadata.Index != 350 {
		t.Fatalf("Snapshot: %+v, %v", got.Metadata, err)
	}
	// Reopen with the snapshot: the log covers it and agrees, so it stays.
	l.Close()
	l = openTestLog(t, fsys)
	s = mustStorage(t, l, snap)
	if last, _ := s.LastIndex(); last != 400 {
		t.Fatalf("reopened: LastIndex %d, want 400", last)
	}
	if first, _ := s.FirstIndex(); first > 351 {
		t.Fatalf("reopened: FirstIndex %d lost entries after the snapshot", first)
	}
	// A snapshot from a term the log does not have at its index: the log
	// diverged and is replaced.
	l.Close()
	l = openTestLog(t, fsys)
	other := pb.SnapshotMetadata{Index: 360, Term: 4}
	s = mustStorage(t, l, other)
	if first, _ := s.FirstIndex(); first != 361 {
		t.Fatalf("diverged log: FirstIndex %d, want 361", first)
	}
	if last, _ := s.LastIndex(); last != 360 {
		t.Fatalf("diverged log: LastIndex %d, want 360", last)
	}
	// A snapshot past the log's end: the log is replaced too.
	l.Close()
	l = openTestLog(t, fsys)
	s = mustStorage(t, l, pb.SnapshotMetadata{Index: 1000, Term: 5})
	if first, _ := s.FirstIndex(); first != 1001 || l.FirstLSN() != 1001 {
		t.Fatalf("snapshot past the end: FirstIndex %d, log starts at %d", first, l.FirstLSN())
	}
	if tm, _ := s.Term(1000); tm != 5 {
		t.Fatalf("Term of the snapshot index: %d", tm)
	}
}

func TestStorageCommitPastLogIsCorrupt(t *testing.T) {
	l := openTestLog(t, vfs.NewMem())
	if _, err := openStorage(l, pb.SnapshotMetadata{}, wal.State{Term: 1, Commit: 5}); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("commit 5 over an empty log: %v, want ErrCorrupt", err)
	}
}
