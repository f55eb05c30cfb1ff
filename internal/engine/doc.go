// Package engine is the in-memory namespace of one metadata partition.
//
// An Engine is a pure state machine: it does no I/O, reads no clock and
// starts no goroutine. Every mutation takes the time it happens at (now, in
// nanoseconds since the Unix epoch) from its caller, so that applying the
// same operations in the same order, with the same times, always produces the
// same state and the same results. The transaction log relies on this:
// recovery is a checkpoint plus a replay of the logged operations.
//
// Concurrency: an Engine is not safe for concurrent use. Exactly one
// goroutine owns it (the server's apply loop) and calls every method; nothing
// in it takes a lock. The one exception is a Frozen view (Freeze): its
// WriteCheckpoint may run on another goroutine while the owner goes on,
// because from the freeze on the owner copies what it changes instead of
// writing over what the view holds (freeze.go).
//
// Errors are syscall.Errno values (syscall.ENOENT, syscall.EEXIST, ...), so
// callers can test them with errors.Is against both the errno and the io/fs
// sentinel errors (fs.ErrNotExist, fs.ErrExist, fs.ErrPermission).
package engine
