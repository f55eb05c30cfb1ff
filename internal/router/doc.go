// Package router is Canopy's federation router: a stateless server that
// joins metadata partitions into one namespace. Clients speak the metadata
// protocol to it as to a single metadata server; it passes each call on to
// the partition that holds what the call names and passes the reply back.
//
// # Placement
//
// A path belongs to the mount entry with the longest matching prefix
// (internal/mount); the entry names a virtual partition and a path inside
// it, and the routing table maps the virtual partition to the addresses of
// the metadata group serving it. A virtual partition is the engine's
// partition id, carried in the high 16 bits of inode numbers, so a call
// that names a node by inode is routed by those bits alone. Both tables
// live in the root partition (virtual partition 0); the router long-polls
// them (TABLES_GET with the version it knows) and publishes each new
// version as one immutable view behind an atomic pointer, which every call
// loads once, without a lock.
//
// # Forwarding
//
// A call is routed by reading only its routing fields (field 1 inode, 2
// path, 4 and 5 the second entry of RENAME and LINK) from the request
// bytes. When the mount entry maps its prefix to a different path inside
// the partition, the path fields are rewritten; every other byte goes on
// untouched, and so does the reply. Calls go out as forwarded calls (see
// rpc.Client.Forward), which carry the client's own client id and call id:
// a retried mutation is recognized by the partition's retry cache even
// when the retry comes through another router.
//
// Nothing waits on a partition. The connection reader that reads a call
// routes it and hands it to a pooled, multiplexed connection to the
// partition; the reply is passed back by whichever goroutine reads it. A
// reply whose client has gone is dropped. Calls in flight are bounded per
// class (reads, writes): beyond the bound a call is refused at once with
// StatusBusy, which clients retry.
//
// A few calls need more than one partition, and are served by a goroutine
// of their own: READDIR of a directory with mount points below it (the
// mount points are merged into the listing), STATFS (summed over the
// partitions), SUMMARY (adding the summaries of the mounts below) and
// the user and group quota calls, which are the whole namespace's: each
// partition holds a share of a quota, and an EDQUOT naming one has the
// router move unused shares to that partition and pass the call on again
// (ownerquota.go).
// RENAME and LINK between different mount entries fail with EXDEV and an
// ErrorDetail naming both mount points; changes under a read-only entry
// fail with EROFS.
//
// # Goroutines
//
// The view is written only by the table watcher goroutine; every other
// goroutine only loads it. A call belongs to the connection reader that
// read it until it is handed to a partition connection, then to whichever
// goroutine receives the reply. The downstream connection pool is guarded
// by its mutex; its connections are safe for concurrent use.
package router
