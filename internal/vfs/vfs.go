package vfs

import "io"

// File is an open file. Which methods work depends on how it was opened:
// files from FS.Create and FS.OpenWrite are write-only, files from FS.Open
// are read-only.
type File interface {
	io.Reader
	io.Writer
	io.WriterAt
	io.Closer

	// Sync makes the file's contents durable. It does not make the file's
	// directory entry durable; see FS.SyncDir.
	Sync() error

	// Datasync makes the file's contents durable like Sync, and its size,
	// but not its times (fdatasync(2)). Rewriting bytes that are already
	// durable and then calling Datasync changes no metadata at all, so a
	// file system need not commit its journal: the cheap sync a log gets
	// from writing into space it prepared.
	Datasync() error
}

// FS is a hierarchical file system. Names are slash-separated paths; an FS
// may interpret relative names against a working directory (Default) or
// against its own root (MemFS).
type FS interface {
	// Create creates the named file, or truncates it if it exists, and
	// opens it for writing.
	Create(name string) (File, error)

	// OpenWrite opens the named file, which must exist, for writing
	// without truncating it: Write starts at offset 0, WriteAt writes
	// anywhere.
	OpenWrite(name string) (File, error)

	// Open opens the named file for reading.
	Open(name string) (File, error)

	// Remove removes the named file or empty directory.
	Remove(name string) error

	// Rename renames oldname to newname, replacing newname if it exists.
	Rename(oldname, newname string) error

	// MkdirAll creates the directory dir and any missing parents. It
	// succeeds if dir already exists.
	MkdirAll(dir string) error

	// ReadDir returns the names of the entries in dir, sorted.
	ReadDir(dir string) ([]string, error)

	// SyncDir makes durable the entries of dir: the files and directories
	// created in it, renamed into or out of it, and removed from it.
	SyncDir(dir string) error

	// Size returns the length in bytes of the named file.
	Size(name string) (int64, error)

	// Truncate changes the length of the named file to size, discarding
	// bytes past it or extending the file with zeros.
	Truncate(name string, size int64) error
}
