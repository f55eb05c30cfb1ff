package fuse

import (
	"bytes"
	"log/slog"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// syncBuffer is a bytes.Buffer safe for the mount's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Reads of 1 MiB with O_DIRECT (the size of the kernel's largest READ)
// return the file's bytes and leave the mount's log empty: a reply that
// size must not go through a pipe, which holds at most 1 MiB by default.
func TestDirectReadsLogNothing(t *testing.T) {
	var logged syncBuffer
	opts := DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	f := mountTest(t, opts)

	const size = 8 << 20
	want := randomBytes(size, 7)
	p := f.path("big")
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatalf("open O_DIRECT: %v", err)
	}
	defer unix.Close(fd)
	// O_DIRECT wants an aligned buffer: a mapping is page aligned.
	buf, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	var got []byte
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatalf("read at %d: %v", len(got), err)
		}
		if n == 0 {
			break
		}
		got = append(got, buf[:n]...)
	}
	sameBytes(t, "O_DIRECT read", got, want)
	if s := logged.String(); s != "" {
		t.Errorf("the mount logged while serving reads:\n%.2000s", s)
	}
}
