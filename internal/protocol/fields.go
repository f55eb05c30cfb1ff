package protocol

import "google.golang.org/protobuf/encoding/protowire"

// Field numbers every request message of api/meta.proto keeps for the same
// purpose (see its header comment), so that a router routes a request from
// these fields alone, without knowing its type. Any other field of a
// request is numbered 10 or more, or is one of these with the meaning
// given here.
const (
	FieldIno       protowire.Number = 1 // the node named by inode, or the parent of a name: uint64
	FieldPath      protowire.Number = 2 // the node named by absolute path: string
	FieldName      protowire.Number = 3 // the name of an entry in the directory of field 1: string
	FieldNewParent protowire.Number = 4 // RENAME, LINK: the second entry's parent: uint64
	FieldNewPath   protowire.Number = 5 // RENAME, LINK: the second entry's path: string
	FieldSeven     protowire.Number = 7 // OpenRequest.flags, ReaddirRequest.cursor
	FieldEight     protowire.Number = 8 // ReaddirRequest.limit
	FieldNine      protowire.Number = 9 // ReaddirRequest.attrs
)
