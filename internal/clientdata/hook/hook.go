// Package hook is where package client leaves the data-path calls it keeps
// off its public surface: client sets these variables in its init, and
// package clientdata (the only other user) wraps them in typed functions.
// The client values travel as any because this package cannot import
// package client (client imports it); clientdata restores the types.
//
// The variables are written once, during package initialization, and only
// read afterwards: any goroutine may call them.
package hook

import (
	"context"

	"github.com/canopyfs/canopy/internal/data"
	"github.com/canopyfs/canopy/internal/object"
)

var (
	// Meta returns the slice calls (ALLOC_SLICES, COMMIT, READ_CHUNKS,
	// COMPACT) of c, a *client.Client.
	Meta func(c any) data.Meta
	// Admin returns the partition-wide slice calls of partition part
	// through c, a *client.Client.
	Admin func(c any, part uint16) data.Admin
	// InlineAdmin returns the inline slice calls of partition part
	// through c, a *client.Client, for the flusher.
	InlineAdmin func(c any, part uint16) data.InlineAdmin
	// Volume returns the data volume of c, a *client.Client, opening it
	// on first use.
	Volume func(ctx context.Context, c any) (*data.Volume, error)
	// SetStore makes opts, a *client.Options, use store as is for file
	// data instead of opening the store the server names.
	SetStore func(opts any, store object.Store)
)
