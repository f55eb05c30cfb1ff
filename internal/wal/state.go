package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/canopyfs/canopy/internal/vfs"
)

// State is the small durable state a Raft replica keeps beside its log:
// the current term, the vote cast in it, and a commit index known to be
// committed (not necessarily the latest one).
type State struct {
	Term   uint64
	Vote   uint64
	Commit uint64
}

// The state file is one fixed-size record:
//
//	magic "canopyst" | version uint32 | term uint64 | vote uint64 | commit uint64 | crc uint32
//
// Integers are little-endian; crc is the CRC-32C of everything before it.
const (
	stateMagic    = "canopyst"
	stateVersion  = 1
	stateSize     = len(stateMagic) + 4 + 3*8 + 4
	stateFileName = "state"
	stateTempName = "state.tmp"
)

// WriteState makes st the durable state of the log directory dir, creating
// dir if needed. It writes the state file under a temporary name, syncs it,
// renames it over the old one and syncs dir, so a crash leaves the old
// state or the new one, never a mix. That is two fsyncs, so callers write
// it when the term or vote changes, not with every batch of records.
func WriteState(fsys vfs.FS, dir string, st State) error {
	if err := ensureDir(fsys, dir); err != nil {
		return fmt.Errorf("write state in %s: %w", dir, err)
	}
	var b [stateSize]byte
	encodeState(&b, st)
	tmp := filepath.Join(dir, stateTempName)
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if _, err := f.Write(b[:]); err != nil {
		f.Close()
		return fmt.Errorf("write state %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync state %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close state %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, stateFileName)); err != nil {
		return fmt.Errorf("rename state %s: %w", tmp, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync state dir %s: %w", dir, err)
	}
	return nil
}

// ReadState returns the durable state of the log directory dir, and
// ok=false if none was ever written. A state file that fails its checksum
// is an error wrapping ErrCorrupt: it is only ever replaced by rename, so
// damage is not a torn write.
func ReadState(fsys vfs.FS, dir string) (st State, ok bool, err error) {
	path := filepath.Join(dir, stateFileName)
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("read state: %w", err)
	}
	defer f.Close()
	var b [stateSize + 1]byte
	n, err := io.ReadFull(f, b[:])
	if err != io.ErrUnexpectedEOF && err != nil {
		if err == io.EOF {
			n = 0
		} else {
			return State{}, false, fmt.Errorf("read state %s: %w", path, err)
		}
	}
	if n != stateSize {
		return State{}, false, fmt.Errorf("state %s has %d bytes, want %d: %w", path, n, stateSize, ErrCorrupt)
	}
	st, err = decodeState(b[:stateSize])
	if err != nil {
		return State{}, false, fmt.Errorf("state %s: %w", path, err)
	}
	return st, true, nil
}

func encodeState(b *[stateSize]byte, st State) {
	o := copy(b[:], stateMagic)
	binary.LittleEndian.PutUint32(b[o:], stateVersion)
	binary.LittleEndian.PutUint64(b[o+4:], st.Term)
	binary.LittleEndian.PutUint64(b[o+12:], st.Vote)
	binary.LittleEndian.PutUint64(b[o+20:], st.Commit)
	binary.LittleEndian.PutUint32(b[o+28:], crc32.Checksum(b[:o+28], crcTable))
}

func decodeState(b []byte) (State, error) {
	o := len(stateMagic)
	if string(b[:o]) != stateMagic {
		return State{}, fmt.Errorf("not a state file: %w", ErrCorrupt)
	}
	if crc32.Checksum(b[:o+28], crcTable) != binary.LittleEndian.Uint32(b[o+28:]) {
		return State{}, fmt.Errorf("crc mismatch: %w", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(b[o:]); v != stateVersion {
		return State{}, fmt.Errorf("unsupported state format version %d", v)
	}
	return State{
		Term:   binary.LittleEndian.Uint64(b[o+4:]),
		Vote:   binary.LittleEndian.Uint64(b[o+12:]),
		Commit: binary.LittleEndian.Uint64(b[o+20:]),
	}, nil
}
