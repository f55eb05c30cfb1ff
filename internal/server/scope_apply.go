package server

import (
	"errors"
	"fmt"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// The confinement checked again at apply. In the replicated mode a scoped
// call is confined by the leader against the state it has applied, then
// proposed; another credential's entry applied in between may move a
// directory the call names out of the subtree. So the entry carries the
// top of the scope (LogRecord.scope_top) and the state machine, on every
// replica, checks again before it applies the request that each directory
// it names (the parents of its entries, or the node it names if that is a
// directory) still lies below the top, refusing the entry with EACCES and
// changing nothing otherwise. The check reads only the namespace, so
// every replica decides alike, and replay decides as the first apply did.
// Files are not walked again: a file the call could name when it was
// confined stays reachable to it, as one shown to a client does
// (docs/security.md).

// errMovedOut refuses an entry whose directory left the scope after the
// call was confined.
var errMovedOut = fmt.Errorf("a directory the call names left its scope: %w", syscall.EACCES)

// stillInside checks the directories req names against top, on the
// apply loop (or the raft goroutine, under the state's lock).
func stillInside(e *engine.Engine, top engine.Ino, req proto.Message) error {
	var dirs, nodes []uint64
	switch r := req.(type) {
	case *pb.EntryRequest:
		dirs = []uint64{r.Parent}
	case *pb.CreateRequest:
		dirs = []uint64{r.Parent}
	case *pb.RenameRequest:
		dirs = []uint64{r.Parent, r.NewParent}
	case *pb.LinkRequest:
		dirs, nodes = []uint64{r.NewParent}, []uint64{r.Ino}
	case *pb.NodeRequest:
		nodes = []uint64{r.Ino}
	case *pb.SetattrRequest:
		nodes = []uint64{r.Ino}
	case *pb.XattrRequest:
		nodes = []uint64{r.Ino}
	case *pb.OpenRequest:
		nodes = []uint64{r.Ino}
	}
	for _, ino := range dirs {
		if err := dirInside(e, engine.Ino(ino), top, false); err != nil {
			return err
		}
	}
	for _, ino := range nodes {
		if err := dirInside(e, engine.Ino(ino), top, true); err != nil {
			return err
		}
	}
	return nil
}

// dirInside checks that directory ino lies below top. A node that is
// gone is left to the request to fail on; one that is not a directory
// passes if anyDir is set.
func dirInside(e *engine.Engine, ino, top engine.Ino, anyDir bool) error {
	ok, err := e.DirUnder(ino, top)
	switch {
	case errors.Is(err, syscall.ENOTDIR) && anyDir, errors.Is(err, syscall.ENOENT):
		return nil
	case err != nil:
		return err
	case !ok:
		return errMovedOut
	}
	return nil
}
