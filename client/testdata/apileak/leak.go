// Package apileak is a fixture for TestPublicAPINamesNoInternalType: the
// declarations marked "leak" name an internal or generated type in their
// exported signatures, the others do not, and the check must tell them
// apart.
package apileak

import (
	"context"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/object"
)

// Options has one leaking field among clean ones.
type Options struct {
	Store  object.Store // leak: Options.Store
	Name   string
	hidden object.Store
}

// Handle leaks through one exported method only.
type Handle struct{ attr *pb.Attr }

// Attr leaks: Handle.Attr.
func (h *Handle) Attr() *pb.Attr { return h.attr }

func (h *Handle) attrOf() *pb.Attr { return h.attr }

// Name is clean.
func (h *Handle) Name() string { return h.hidden().Name }

func (h *Handle) hidden() Options { return Options{hidden: nil} }

// Open leaks through a parameter.
func Open(ctx context.Context, s object.Store) (*Handle, error) { return nil, nil }

// Lister leaks through an interface method: Lister.List.
type Lister interface {
	List(ctx context.Context) ([]object.Info, error)
	Len() int
}

// Mode is clean: the conversion makes it a uint32.
const Mode = uint32(pb.SetattrMask_SETATTR_MODE)

// Default leaks: its type is pb.Method.
var Default = pb.Method_NULL

// Info leaks: an alias of an internal type.
type Info = object.Info

// Pages leaks inside a composite type.
type Pages map[string][]*pb.Slice

// Clean is clean.
func Clean(n int) string { return "" }

type result struct {
	Info  object.Info // reachable through Hidden
	cause error
}

// Hidden leaks through the exported field of an unexported result type.
func Hidden() result { return result{} }

// Results leaks in a result list.
func Results() (int, chan<- *pb.Attr) { return 0, nil }
