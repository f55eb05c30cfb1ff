// Package mount is the federation mount table: it maps a path prefix of the
// global namespace to the place that holds it, a virtual partition and a
// path inside that partition.
//
// Placement has two levels. Mount entries name one of VirtualPartitions
// virtual partitions, a fixed numbering that never changes; a separate
// routing table maps each virtual partition to a metadata group (the
// addresses of its replicas). Rebalancing edits the routing table and moves
// the subtree, never the numbering, so mount entries stay valid.
//
// A Table is the durable, versioned form, kept in the root partition. A
// router compiles it into a Snapshot, an immutable radix tree, and
// publishes it through a Current, an atomic pointer: every request loads
// the pointer and looks its path up without taking a lock, and a new
// version is swapped in whole when the table changes, so a reader never sees
// a half-applied change. The routing table has the same pair of forms
// (Routing, RoutingSnapshot, CurrentRouting).
//
// Paths given to Lookup, LookupAppend, Children and SameEntry must already
// be normalized (see Normalize); they return no error, and on a path that
// is not normalized they still never panic but the answer is unspecified.
//
// Errors wrap syscall.Errno values (EINVAL, ENAMETOOLONG, ENOENT), so a
// router can hand them on to its client unchanged; test them with
// errors.Is.
package mount
