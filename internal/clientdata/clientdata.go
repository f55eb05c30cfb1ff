// Package clientdata gives the module's own tools (the FUSE layer, the
// command line's fsck and collector, the tests) the data-path side of a
// client.Client: the slice calls in their protocol types, the
// partition-wide slice lists, the data volume and a ready-made object
// store. Package client keeps these off its public API so that code
// outside the module never has to name an internal or generated type; it
// hands them over through package hook.
//
// The functions keep no state of their own: they are safe wherever the
// client they are given is, that is from any goroutine.
package clientdata

import (
	"context"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata/hook"
	"github.com/canopyfs/canopy/internal/data"
	"github.com/canopyfs/canopy/internal/object"
)

// Meta returns c's slice calls (AllocSlices, Commit, ReadChunks, Compact),
// acting as c's identity.
func Meta(c *client.Client) data.Meta { return hook.Meta(c) }

// Admin returns the partition-wide slice calls of partition part, for the
// collector and fsck.
func Admin(c *client.Client, part uint16) data.Admin { return hook.Admin(c, part) }

// InlineAdmin returns the inline slice calls of partition part, for the
// flusher.
func InlineAdmin(c *client.Client, part uint16) data.InlineAdmin { return hook.InlineAdmin(c, part) }

// Volume returns the volume c's files are stored in, opening its object
// store on first use (the store the server names, unless the options c was
// dialed with say otherwise).
func Volume(ctx context.Context, c *client.Client) (*data.Volume, error) {
	return hook.Volume(ctx, c)
}

// WithStore returns opts set to store file data in store, used as is,
// rather than in the store the server names (VOLUME) or Options.Storage.
func WithStore(opts client.Options, store object.Store) client.Options {
	hook.SetStore(&opts, store)
	return opts
}
