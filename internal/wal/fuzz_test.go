package wal

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/canopyfs/canopy/internal/vfs"
)

// FuzzLogOpen opens a log whose only segment holds arbitrary bytes. Open
// must not panic; as the damage can only be in the last segment, it must
// not report corruption either, only cut. Whatever Open accepts, Replay
// must read back without error, with gapless lsns, and the log must take
// appends that survive a reopen.
//
// The seeds in testdata/fuzz/FuzzLogOpen are well-formed segments and
// damaged ones.
func FuzzLogOpen(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("wal"); err != nil {
			t.Fatal(err)
		}
		writeAll(t, mem, filepath.Join("wal", segmentName(1)), data)

		opts := Options{SegmentSize: 1 << 10, Preallocate: 700, Logger: quiet, bufferSize: 512}
		l, err := Open(mem, "wal", opts)
		if errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open of a single segment reported corruption: %v", err)
		}
		if err != nil {
			return // an unsupported version
		}
		next := uint64(1)
		err = l.Replay(0, func(lsn uint64, rec []byte) error {
			if lsn != next {
				t.Fatalf("Replay gave lsn %d, want %d", lsn, next)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatalf("Replay after a successful Open: %v", err)
		}
		if next-1 != l.LastLSN() {
			t.Fatalf("Replay ended at lsn %d, LastLSN is %d", next-1, l.LastLSN())
		}

		last, err := l.Append([]byte("after"))
		if err != nil {
			t.Fatal(err)
		}
		mustClose(t, l)
		l = openLog(t, mem, "wal", opts)
		defer mustClose(t, l)
		var got []byte
		if err := l.Replay(last-1, func(lsn uint64, rec []byte) error {
			got = bytes.Clone(rec)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if l.LastLSN() != last || string(got) != "after" {
			t.Fatalf("after reopen: LastLSN %d, record %q; want %d, %q", l.LastLSN(), got, last, "after")
		}
	})
}
