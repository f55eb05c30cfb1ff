// Package object stores and fetches immutable objects: the blocks that hold
// Canopy's file data. It knows nothing of files, chunks or slices; callers
// name objects by key (for example
// "chunks/<id/1000000>/<id/1000>/<id>_<index>_<size>") and this package
// keeps the bytes.
//
// Two backends implement Store: a local directory (NewLocal) and any
// S3-compatible service (NewS3). Open picks one from a URL.
//
// Semantics shared by every backend:
//
//   - Put writes a whole object and makes it visible atomically: a reader
//     sees the previous object, the new object, or (for a new key) none, never
//     a partial one. Putting an existing key replaces it.
//   - Get(key, off, limit) returns up to limit bytes starting at off; limit < 0
//     reads to the end. A range that runs past the end is cut short at the end
//     of the object, and a range that starts at or past the end (including any
//     range of an empty object) yields an empty body and no error. A negative
//     off is an error. Missing keys fail with ErrNotFound whatever the range.
//   - Head and Get of a missing key fail with ErrNotFound; Delete of a missing
//     key succeeds.
//   - List returns objects whose key starts with prefix (a plain string
//     prefix, not a directory) and sorts after startAfter, in byte order of
//     their keys, at most limit of them (limit <= 0: all).
//   - Keys are validated the same way everywhere; see ValidateKey.
package object

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// Store is object storage. Implementations are safe for concurrent use.
type Store interface {
	// Put stores data under key as one whole object, atomically visible.
	Put(ctx context.Context, key string, data []byte) error
	// Get reads limit bytes of the object from off (limit < 0: to the end).
	// The caller must close the returned reader.
	Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error)
	// Head returns the size and modification time of an object.
	Head(ctx context.Context, key string) (Info, error)
	// Delete removes an object; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// List returns up to limit objects (limit <= 0: no limit) whose keys
	// start with prefix and sort after startAfter, sorted by key.
	List(ctx context.Context, prefix, startAfter string, limit int) ([]Info, error)
	// String describes the store for logs, without credentials.
	String() string
}

// Syncer is implemented by stores whose Puts become durable together: an
// object is visible as soon as Put returns, but survives a crash of the
// machine only once a later Sync has returned. A caller that is about to
// make metadata point at objects calls Sync first (see the package Sync).
type Syncer interface {
	Sync(ctx context.Context) error
}

// Sync makes every object already put to s durable: it calls s.Sync if s
// defers durability, and does nothing for stores whose Put is durable on
// return.
func Sync(ctx context.Context, s Store) error {
	if sy, ok := s.(Syncer); ok {
		return sy.Sync(ctx)
	}
	return nil
}

// Info describes one stored object.
type Info struct {
	Key      string
	Size     int64
	Modified time.Time
}

// sentinel is an error value that also matches a standard io/fs error.
type sentinel struct {
	msg string
	is  error
}

func (e *sentinel) Error() string        { return e.msg }
func (e *sentinel) Is(target error) bool { return target == e.is }

var (
	// ErrNotFound reports a missing object. errors.Is(err, fs.ErrNotExist)
	// holds for it as well.
	ErrNotFound error = &sentinel{"object not found", fs.ErrNotExist}
	// ErrInvalidKey reports a key that ValidateKey rejects.
	// errors.Is(err, fs.ErrInvalid) holds for it as well.
	ErrInvalidKey error = &sentinel{"invalid object key", fs.ErrInvalid}
	// ErrInvalidRange reports a negative offset given to Get.
	ErrInvalidRange error = &sentinel{"invalid object range", fs.ErrInvalid}
)

// MaxKeyLen is the longest key accepted, in bytes (the S3 limit).
const MaxKeyLen = 1024

// tempPrefix starts the names of the local backend's temporary files. No key
// element may start with it, so a temporary file is never taken for an object.
const tempPrefix = ".canopy-tmp-"

// ValidateKey reports whether key is an acceptable object key. A key is
// non-empty valid UTF-8 of at most MaxKeyLen bytes, holds no NUL byte, is a
// clean relative slash-separated path (no leading or trailing "/", no empty,
// "." or ".." elements), and has no element starting with ".canopy-tmp-"
// (reserved for temporary files). Failures wrap ErrInvalidKey.
func ValidateKey(key string) error {
	if !validKey(key) {
		return &fs.PathError{Op: "validate", Path: key, Err: ErrInvalidKey}
	}
	return nil
}

func validKey(key string) bool {
	if key == "" || len(key) > MaxKeyLen || !utf8.ValidString(key) ||
		strings.IndexByte(key, 0) >= 0 || key[0] == '/' || path.Clean(key) != key {
		return false
	}
	for elem := range strings.SplitSeq(key, "/") {
		if elem == "." || elem == ".." || strings.HasPrefix(elem, tempPrefix) {
			return false
		}
	}
	return true
}

// checkKey validates key for operation op.
func checkKey(op, key string) error {
	if !validKey(key) {
		return &fs.PathError{Op: op, Path: key, Err: ErrInvalidKey}
	}
	return nil
}

// checkRange validates the arguments of Get.
func checkRange(key string, off int64) error {
	if off < 0 {
		return &fs.PathError{Op: "get", Path: key, Err: ErrInvalidRange}
	}
	return nil
}

// notFound is the error every backend returns for a missing object.
func notFound(op, key string) error {
	return &fs.PathError{Op: op, Path: key, Err: ErrNotFound}
}

// emptyBody is the reader returned for ranges that hold no bytes.
func emptyBody() io.ReadCloser { return io.NopCloser(strings.NewReader("")) }

var errStopList = errors.New("stop listing")
