// Package model is a reference model of Canopy's namespace semantics,
// written from Linux's man pages and VFS code rather than from the engine,
// with the machinery to test any layer against it.
//
// Operations are data: an Op prints to and parses from a one-line text
// form, so that a failing sequence can be written down, replayed and
// edited. A Generator produces a seeded random stream of Ops; the Oracle
// applies an Op and returns the result Linux would give; a Runner applies
// the same stream to the Oracle and to a Target (the engine in process, a
// server over RPC, a FUSE mount) and compares every result. On the first
// mismatch it reports the seed, the step and the recent history; Replay
// reruns a written-down list and Shrink cuts a failing list down to the
// operations that matter.
//
// The model favours obviousness over speed: link counts, parents and used
// bytes are recomputed from the entries whenever they are needed rather
// than maintained incrementally, and each operation checks its errors top to
// bottom in the order Linux's system call does.
//
// Each inode-level operation is modelled as its *at system call with a
// directory file descriptor for the parent (mkdirat(parent, name),
// renameat2(oldparent, name, newparent, newname), ...), and SetAttr, xattrs
// and Readdir as the f-variants on an open descriptor. Names with a '/' or a
// NUL, and the empty name, cannot be expressed there; for those the model
// follows the engine's documented contract (EINVAL, ENOENT).
//
// Nothing here is safe for concurrent use: an Oracle, a Generator and a
// Runner each belong to the goroutine that drives them.
package model
