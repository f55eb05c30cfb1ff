package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// SeedTerm is the term of a seeded replica's first snapshot.
const SeedTerm = 1

// ErrSeeded reports a directory that holds a replica already.
var ErrSeeded = errors.New("replica: directory holds a replica already")

// Seed makes dir the directory of a replica whose group starts from a
// state that existed before it (a single-replica partition upgraded in
// place) instead of from an empty one: it writes that state, which write
// produces in the StateMachine's Snapshot format, as the replica's first
// snapshot, at index and term SeedTerm, with voters as the group's
// members. Start then restores it and runs the log from index+1, without
// bootstrapping. The state file is written first and the snapshot last,
// so that a crash part-way leaves no snapshot, and Seed may be called
// again; once it has returned, Seeded reports true.
func Seed(fsys vfs.FS, dir string, index uint64, voters []uint64, write func(io.Writer) error) error {
	if index == 0 || len(voters) == 0 {
		return fmt.Errorf("seed replica in %s: index %d, %d voters", dir, index, len(voters))
	}
	if ok, err := Seeded(fsys, dir); err != nil || ok {
		if err == nil {
			err = ErrSeeded
		}
		return fmt.Errorf("seed replica in %s: %w", dir, err)
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return fmt.Errorf("seed replica: create %s: %w", dir, err)
	}
	if err := wal.WriteState(fsys, dir, wal.State{Term: SeedTerm, Commit: index}); err != nil {
		return fmt.Errorf("seed replica in %s: %w", dir, err)
	}
	meta := pb.SnapshotMetadata{Index: index, Term: SeedTerm, ConfState: pb.ConfState{Voters: voters}}
	err := wal.WriteCheckpoint(fsys, dir, index, func(w io.Writer) error {
		mb, err := meta.Marshal()
		if err != nil {
			return err
		}
		var hdr [4]byte
		binary.LittleEndian.PutUint32(hdr[:], uint32(len(mb)))
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := w.Write(mb); err != nil {
			return err
		}
		return write(w)
	})
	if err != nil {
		return fmt.Errorf("seed replica in %s: %w", dir, err)
	}
	return nil
}

// Seeded reports whether dir holds a replica's snapshot.
func Seeded(fsys vfs.FS, dir string) (bool, error) {
	ckpts, err := wal.Checkpoints(fsys, dir)
	if err != nil {
		return false, fmt.Errorf("list snapshots in %s: %w", dir, err)
	}
	return len(ckpts) > 0, nil
}
