package vfs

import (
	"errors"
	"io/fs"
)

// Op names an FS or File operation that FaultyFS can fail.
type Op string

// The operations FaultyFS reports to its inject function.
const (
	OpCreate    Op = "create"
	OpOpenWrite Op = "openwrite"
	OpOpen      Op = "open"
	OpRemove    Op = "remove"
	OpRename    Op = "rename" // name is the old name
	OpMkdirAll  Op = "mkdirall"
	OpReadDir   Op = "readdir"
	OpSyncDir   Op = "syncdir"
	OpSize      Op = "size"
	OpTruncate  Op = "truncate"
	OpRead      Op = "read"  // File.Read
	OpWrite     Op = "write" // File.Write and File.WriteAt
	OpSync      Op = "sync"  // File.Sync and File.Datasync
	OpClose     Op = "close" // File.Close
)

// ErrInjected is a convenient error for an inject function to return.
var ErrInjected = errors.New("vfs: injected fault")

// FaultyFS wraps an FS and fails the operations an inject function picks.
// Before each operation it calls inject with the operation and the name of
// the file or directory; if inject returns an error, the operation is not
// carried out and fails with that error, wrapped in an *fs.PathError.
// A failed File.Write writes nothing; a failed File.Close still closes.
//
// FaultyFS is as safe for concurrent use as the FS it wraps, provided
// inject is too.
type FaultyFS struct {
	fs     FS
	inject func(op Op, name string) error
}

var _ FS = (*FaultyFS)(nil)

// NewFaulty returns an FS that performs its operations on fs, failing those
// for which inject returns an error.
func NewFaulty(fs FS, inject func(op Op, name string) error) *FaultyFS {
	return &FaultyFS{fs: fs, inject: inject}
}

func (f *FaultyFS) check(op Op, name string) error {
	if err := f.inject(op, name); err != nil {
		return &fs.PathError{Op: string(op), Path: name, Err: err}
	}
	return nil
}

func (f *FaultyFS) wrap(name string, file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &faultyFile{fs: f, name: name, file: file}, nil
}

// Create implements FS.
func (f *FaultyFS) Create(name string) (File, error) {
	if err := f.check(OpCreate, name); err != nil {
		return nil, err
	}
	file, err := f.fs.Create(name)
	return f.wrap(name, file, err)
}

// OpenWrite implements FS.
func (f *FaultyFS) OpenWrite(name string) (File, error) {
	if err := f.check(OpOpenWrite, name); err != nil {
		return nil, err
	}
	file, err := f.fs.OpenWrite(name)
	return f.wrap(name, file, err)
}

// Open implements FS.
func (f *FaultyFS) Open(name string) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.fs.Open(name)
	return f.wrap(name, file, err)
}

// Remove implements FS.
func (f *FaultyFS) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

// Rename implements FS.
func (f *FaultyFS) Rename(oldname, newname string) error {
	if err := f.check(OpRename, oldname); err != nil {
		return err
	}
	return f.fs.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (f *FaultyFS) MkdirAll(dir string) error {
	if err := f.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return f.fs.MkdirAll(dir)
}

// ReadDir implements FS.
func (f *FaultyFS) ReadDir(dir string) ([]string, error) {
	if err := f.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	return f.fs.ReadDir(dir)
}

// SyncDir implements FS.
func (f *FaultyFS) SyncDir(dir string) error {
	if err := f.check(OpSyncDir, dir); err != nil {
		return err
	}
	return f.fs.SyncDir(dir)
}

// Size implements FS.
func (f *FaultyFS) Size(name string) (int64, error) {
	if err := f.check(OpSize, name); err != nil {
		return 0, err
	}
	return f.fs.Size(name)
}

// Truncate implements FS.
func (f *FaultyFS) Truncate(name string, size int64) error {
	if err := f.check(OpTruncate, name); err != nil {
		return err
	}
	return f.fs.Truncate(name, size)
}

// faultyFile is a File opened through a FaultyFS.
type faultyFile struct {
	fs   *FaultyFS
	name string
	file File
}

func (f *faultyFile) Read(p []byte) (int, error) {
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.file.Read(p)
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.file.Write(p)
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.file.WriteAt(p, off)
}

func (f *faultyFile) Datasync() error {
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	return f.file.Datasync()
}

func (f *faultyFile) Sync() error {
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	return f.file.Sync()
}

// Close closes the underlying file even when it reports an injected
// fault, as close(2) releases the descriptor even when it fails.
func (f *faultyFile) Close() error {
	if err := f.fs.check(OpClose, f.name); err != nil {
		f.file.Close()
		return err
	}
	return f.file.Close()
}
