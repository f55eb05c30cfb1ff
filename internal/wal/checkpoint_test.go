package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/canopyfs/canopy/internal/vfs"
)

func writeCheckpoint(t *testing.T, fsys vfs.FS, dir string, lsn uint64, body []byte) {
	t.Helper()
	err := WriteCheckpoint(fsys, dir, lsn, func(w io.Writer) error {
		// In pieces, as a serializer would write.
		for chunk := range slices.Chunk(body, 1000) {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WriteCheckpoint(%d): %v", lsn, err)
	}
}

// openCheckpoint opens the newest checkpoint and reads its body.
func openCheckpoint(t *testing.T, fsys vfs.FS, dir string) (lsn uint64, body []byte, ok bool) {
	t.Helper()
	lsn, r, ok, err := OpenCheckpoint(fsys, dir)
	if err != nil {
		t.Fatalf("OpenCheckpoint: %v", err)
	}
	if !ok {
		return 0, nil, false
	}
	defer r.Close()
	body, err = io.ReadAll(r)
	if err != nil {
		t.Fatalf("read checkpoint body: %v", err)
	}
	return lsn, body, true
}

func checkpointBody(lsn uint64, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(lsn) ^ byte(i) ^ byte(i>>8)
	}
	return b
}

func TestCheckpointRoundTrip(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		if _, _, ok := openCheckpoint(t, fsys, dir); ok {
			t.Fatal("found a checkpoint in a missing directory")
		}
		for _, size := range []int{0, 1, 1 << 20} {
			lsn := uint64(size + 7)
			want := checkpointBody(lsn, size)
			writeCheckpoint(t, fsys, dir, lsn, want)
			gotLSN, got, ok := openCheckpoint(t, fsys, dir)
			if !ok || gotLSN != lsn || !bytes.Equal(got, want) {
				t.Fatalf("read back checkpoint: lsn %d, %d bytes, ok %v; want lsn %d, %d bytes", gotLSN, len(got), ok, lsn, size)
			}
		}
	})
}

func TestCheckpointKeepsNewestTwo(t *testing.T) {
	mem := vfs.NewMem()
	for _, lsn := range []uint64{10, 20, 30, 40} {
		writeCheckpoint(t, mem, "ckpt", lsn, checkpointBody(lsn, 100))
	}
	names, err := mem.ReadDir("ckpt")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{checkpointName(30), checkpointName(40)}
	if !slices.Equal(names, want) {
		t.Fatalf("checkpoint dir holds %q, want %q", names, want)
	}
}

func TestCheckpointDamagedFallsBack(t *testing.T) {
	damages := map[string]func([]byte) []byte{
		"torn":          func(b []byte) []byte { return b[:len(b)-1] },
		"flipped body":  func(b []byte) []byte { b[checkpointHeaderSize+50] ^= 1; return b },
		"flipped crc":   func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"header only":   func(b []byte) []byte { return b[:checkpointHeaderSize] },
		"empty":         func(b []byte) []byte { return nil },
		"wrong lsn":     func(b []byte) []byte { b[len(checkpointMagic)+4] ^= 1; return b },
		"not a header":  func(b []byte) []byte { b[0] = 'X'; return b },
		"extended zero": func(b []byte) []byte { return append(b, 0, 0, 0, 0) },
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			writeCheckpoint(t, mem, "ckpt", 10, checkpointBody(10, 500))
			writeCheckpoint(t, mem, "ckpt", 20, checkpointBody(20, 500))
			path := filepath.Join("ckpt", checkpointName(20))
			writeAll(t, mem, path, damage(readAll(t, mem, path)))

			lsn, body, ok := openCheckpoint(t, mem, "ckpt")
			if !ok || lsn != 10 || !bytes.Equal(body, checkpointBody(10, 500)) {
				t.Fatalf("got lsn %d, ok %v; want the older checkpoint, lsn 10", lsn, ok)
			}

			path = filepath.Join("ckpt", checkpointName(10))
			writeAll(t, mem, path, damage(readAll(t, mem, path)))
			if lsn, _, ok := openCheckpoint(t, mem, "ckpt"); ok {
				t.Fatalf("both checkpoints damaged, yet got lsn %d", lsn)
			}
		})
	}
}

func TestCheckpointBodyRecheckedAtEnd(t *testing.T) {
	const size = 4 * bufferSize
	mem := vfs.NewMem()
	writeCheckpoint(t, mem, "ckpt", 10, checkpointBody(10, size))
	_, r, ok, err := OpenCheckpoint(mem, "ckpt")
	if err != nil || !ok {
		t.Fatalf("OpenCheckpoint: ok %v, %v", ok, err)
	}
	defer r.Close()
	// Zero the file's end after it was verified, beyond what the reader
	// has buffered; the open reader sees the change.
	path := filepath.Join("ckpt", checkpointName(10))
	f, err := mem.OpenWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	const keep = 3 * bufferSize
	if err := mem.Truncate(path, keep); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, size+checkpointHeaderSize+checkpointTrailerSize-keep), keep); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := io.ReadAll(r); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("reading a body changed after verification: err = %v, want ErrCorrupt", err)
	}
}

func TestCheckpointBodyError(t *testing.T) {
	mem := vfs.NewMem()
	writeCheckpoint(t, mem, "ckpt", 10, []byte("ten"))
	boom := errors.New("serializer failed")
	err := WriteCheckpoint(mem, "ckpt", 20, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteCheckpoint: err = %v, want the body's error", err)
	}
	names, _ := mem.ReadDir("ckpt")
	if !slices.Equal(names, []string{checkpointName(10)}) {
		t.Fatalf("after a failed write the dir holds %q", names)
	}
	if lsn, body, _ := openCheckpoint(t, mem, "ckpt"); lsn != 10 || string(body) != "ten" {
		t.Fatalf("got lsn %d %q, want lsn 10", lsn, body)
	}
}

func TestCheckpointCrash(t *testing.T) {
	// Crash at every file-system operation of a WriteCheckpoint: the
	// newest checkpoint found afterwards is the old one or the new one,
	// complete.
	for crashAt := 1; ; crashAt++ {
		mem := vfs.NewMem()
		writeCheckpoint(t, mem, "ckpt", 10, checkpointBody(10, 3000))
		ops := 0
		var crashed *vfs.MemFS
		fsys := vfs.NewFaulty(mem, func(op vfs.Op, name string) error {
			if crashed != nil {
				return errCrashed
			}
			if ops++; ops == crashAt {
				crashed = mem.Crash()
				return errCrashed
			}
			return nil
		})
		err := WriteCheckpoint(fsys, "ckpt", 20, func(w io.Writer) error {
			_, err := w.Write(checkpointBody(20, 3000))
			return err
		})
		if crashed == nil {
			if err != nil {
				t.Fatalf("WriteCheckpoint without a crash: %v", err)
			}
			crashed = mem.Crash()
		}
		lsn, body, ok := openCheckpoint(t, crashed, "ckpt")
		if !ok || !bytes.Equal(body, checkpointBody(lsn, 3000)) {
			t.Fatalf("crash at op %d: got lsn %d, ok %v, body intact %v", crashAt, lsn, ok, ok && bytes.Equal(body, checkpointBody(lsn, 3000)))
		}
		if err == nil {
			if lsn != 20 {
				t.Fatalf("crash after WriteCheckpoint returned: got lsn %d, want 20", lsn)
			}
			// Leftover temporary files are cleared by the next write.
			writeCheckpoint(t, crashed, "ckpt", 30, nil)
			names, _ := crashed.ReadDir("ckpt")
			if want := []string{checkpointName(20), checkpointName(30)}; !slices.Equal(names, want) {
				t.Fatalf("after another checkpoint: dir holds %q, want %q", names, want)
			}
			return
		}
		t.Run(fmt.Sprint("crash at op ", crashAt), func(t *testing.T) {
			writeCheckpoint(t, crashed, "ckpt", 30, nil)
			names, _ := crashed.ReadDir("ckpt")
			for _, name := range names {
				if _, ok := parseCheckpointName(name); !ok {
					t.Errorf("left %s behind", name)
				}
			}
		})
	}
}
