// Package data moves file contents between a client and object storage:
// the writer that buffers a file's writes into slices and blocks, uploads
// them and has them committed, the reader that turns a chunk's slices into
// bytes with a bounded block cache and readahead, and the background work
// that keeps the object store and the metadata in agreement (the garbage
// collector, the orphan sweep, compaction and fsck).
//
// It knows nothing of the network: it speaks to the metadata service
// through the Meta and Admin interfaces (the SDK implements them) and to
// objects through object.Store. See docs/data.md.
//
// Layout. A file is split into chunks of Volume.ChunkSize bytes. Every
// write run becomes a slice with a new id; the slice's bytes are stored as
// objects of at most Volume.BlockSize bytes named by layout.BlockKey. A
// slice is committed (COMMIT) only after all its objects are stored, so the
// metadata never names a missing object.
//
// Ownership. A Volume is shared by every file of one client and is safe for
// concurrent use. A Writer and a Reader belong to one open file; the file
// serializes calls to them with its own lock.
package data
