package protocol

// An inode number is 64 bits: the partition that owns the node in the high
// PartitionBits, and a number local to that partition in the rest. Local
// number 1 of every partition is its root directory; local number 0 is
// never a node.
const (
	PartitionBits = 16
	LocalBits     = 64 - PartitionBits

	// LocalMask selects the local part of an inode number.
	LocalMask = 1<<LocalBits - 1

	// MaxLocal is the largest local number a partition may allocate.
	MaxLocal = LocalMask
)

// PartitionOf returns the partition that owns ino.
func PartitionOf(ino uint64) uint16 { return uint16(ino >> LocalBits) }

// LocalOf returns ino's number inside its partition.
func LocalOf(ino uint64) uint64 { return ino & LocalMask }

// MakeIno returns the inode number of local number local in partition p.
// local must not exceed MaxLocal.
func MakeIno(p uint16, local uint64) uint64 { return uint64(p)<<LocalBits | local&LocalMask }

// RootIno returns the inode number of partition p's root directory.
func RootIno(p uint16) uint64 { return MakeIno(p, 1) }

// IsRoot reports whether ino is the root directory of its partition.
func IsRoot(ino uint64) bool { return LocalOf(ino) == 1 }

// RouterIDLen is how many leading bytes of the client id in the hello of
// a router's connection to a partition name the router: every connection
// of one router starts with the same ones (the rest tells them apart), so
// a partition can tell which router forwarded a call (rpc.Call.Via) and
// whether a client it hears through one router is the client another
// router says has left it.
const RouterIDLen = 8

// RouterConnID returns a client id for a connection of the router named
// by the first RouterIDLen bytes of router, the rest taken from unique.
func RouterConnID(router, unique [16]byte) [16]byte {
	id := unique
	copy(id[:RouterIDLen], router[:RouterIDLen])
	return id
}

// SameRouter reports whether two connections' client ids name the same
// router (RouterConnID).
func SameRouter(a, b [16]byte) bool {
	return [RouterIDLen]byte(a[:RouterIDLen]) == [RouterIDLen]byte(b[:RouterIDLen])
}
