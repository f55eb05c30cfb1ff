// Package protocol holds the facts of Canopy's metadata protocol that more
// than one role needs, so that each lives in one place: how an inode
// number names the partition that owns it (ino.go), what class each method
// belongs to, which request message it takes and how a router routes it
// (methods.go), and the conversion
// between the wire's mount entries and the mount table's (mounts.go).
//
// The server, the router, the SDK, the data path and the command line all
// read these facts from here; adding a method or changing the inode layout
// is a change to this package (and to api/meta.proto), not a hunt through
// the tree. The package has no state and starts no goroutines.
package protocol
