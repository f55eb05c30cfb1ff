package vfs

import (
	"io"
	"io/fs"
	"syscall"
)

type fileMode int

const (
	modeRead fileMode = iota
	modeWrite
)

// memFile is an open MemFS file. Its state is guarded by fs.mu, so one
// memFile may be used from several goroutines, like an *os.File.
type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string
	mode   fileMode
	pos    int // offset of the next read or write (not moved by WriteAt)
	closed bool
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, pathErr("read", f.name, fs.ErrClosed)
	}
	if f.mode != modeRead {
		return 0, pathErr("read", f.name, syscall.EBADF)
	}
	if f.pos >= len(f.node.data) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.node.data[f.pos:])
	f.pos += n
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, pathErr("write", f.name, fs.ErrClosed)
	}
	if f.mode != modeWrite {
		return 0, pathErr("write", f.name, syscall.EBADF)
	}
	f.node.writeAt(f.pos, p)
	f.pos += len(p)
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, pathErr("write", f.name, fs.ErrClosed)
	}
	if f.mode != modeWrite {
		return 0, pathErr("write", f.name, syscall.EBADF)
	}
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	f.node.writeAt(int(off), p)
	return len(p), nil
}

// Datasync is Sync: a MemFS file has no times to leave out.
func (f *memFile) Datasync() error { return f.Sync() }

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("sync", f.name, fs.ErrClosed)
	}
	f.node.sync()
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}
