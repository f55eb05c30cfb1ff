package client

import (
	"context"
	"fmt"
	"os"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/protocol"
)

// Durability says when a change's reply comes back (Options.Durability;
// docs/server.md, "Durability modes").
type Durability uint8

const (
	// DurabilityStrict: every change is answered once it is durable (in a
	// replicated partition, held by a quorum). The SDK's default.
	DurabilityStrict Durability = iota

	// DurabilityPOSIX: a change is answered once it is applied and ordered
	// in the partition's log, before it is durable, as a local file
	// system answers before its journal commits; the server's group
	// commit makes it durable moments later. Durability is waited for
	// where POSIX puts it: File.Sync (fsync) and Client.Sync (syncfs). A
	// crash of the server loses at most a suffix of its log: changes
	// answered after the last sync, never one without those before it.
	// Replicated partitions answer as in DurabilityStrict. The mount's
	// default.
	DurabilityPOSIX
)

// String returns "strict" or "posix".
func (d Durability) String() string {
	switch d {
	case DurabilityStrict:
		return "strict"
	case DurabilityPOSIX:
		return "posix"
	}
	return fmt.Sprintf("Durability(%d)", uint8(d))
}

// ParseDurability parses "strict" or "posix".
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "strict":
		return DurabilityStrict, nil
	case "posix":
		return DurabilityPOSIX, nil
	}
	return 0, fmt.Errorf("durability %q: want strict or posix", s)
}

// unsynced is the set of partitions a DurabilityPOSIX client changed
// since its last Sync, shared by the clients As returns. Safe for
// concurrent use.
type unsynced struct {
	mu    sync.Mutex
	parts map[uint16]struct{}
}

// note records the partition a mutation of method m with request req
// goes to: the one of the inode in field 1, or partition 0 for a call by
// path (which the root's tables place).
func (u *unsynced) note(m pb.Method, req proto.Message) {
	if u == nil || !protocol.IsMutation(m) {
		return
	}
	var part uint16
	msg := req.ProtoReflect()
	if fd := msg.Descriptor().Fields().ByNumber(1); fd != nil && fd.Kind() == protoreflect.Uint64Kind {
		part = protocol.PartitionOf(msg.Get(fd).Uint())
	}
	u.mu.Lock()
	if u.parts == nil {
		u.parts = make(map[uint16]struct{})
	}
	u.parts[part] = struct{}{}
	u.mu.Unlock()
}

// take returns the partitions noted and forgets them.
func (u *unsynced) take() []uint16 {
	u.mu.Lock()
	defer u.mu.Unlock()
	parts := make([]uint16, 0, len(u.parts)+1)
	for p := range u.parts {
		parts = append(parts, p)
	}
	clear(u.parts)
	return parts
}

// Sync waits until every change this client (and the clients As returned
// for it) was answered before the call is durable, in every partition it
// changed: syncfs(2) for the client. With DurabilityStrict every change
// already is, and Sync returns at once.
func (c *Client) Sync(ctx context.Context) error {
	if c.unsynced == nil {
		return nil
	}
	for _, p := range c.unsynced.take() {
		if err := c.SyncIno(ctx, Ino(protocol.RootIno(p))); err != nil {
			c.unsynced.note(pb.Method_SETATTR, &pb.SetattrRequest{Ino: protocol.RootIno(p)}) // still to sync
			return err
		}
	}
	return nil
}

// SyncIno waits until the log of ino's partition is durable up to every
// change answered before the call (SYNC). It is what File.Sync adds, in
// DurabilityPOSIX, to the commit of the file's data.
func (c *Client) SyncIno(ctx context.Context, ino Ino) error {
	if err := c.call(ctx, pb.Method_SYNC, &pb.NodeRequest{Ino: uint64(ino)}, nil, "sync", ""); err != nil {
		return err
	}
	return nil
}

// durableKey marks a context whose calls are answered once durable, in
// DurabilityPOSIX too (withDurable).
type durableKey struct{}

// withDurable returns ctx with its calls marked to be answered once
// durable: the commit of an fsync, which then needs no SYNC after it
// (the partition's log is durable up to it, so up to everything before
// it).
func withDurable(ctx context.Context) context.Context {
	return context.WithValue(ctx, durableKey{}, true)
}

func durableCall(ctx context.Context) bool { return ctx.Value(durableKey{}) != nil }

// syncFile is File.Sync's last step in DurabilityPOSIX.
func (c *Client) syncFile(ctx context.Context, ino Ino, name string) error {
	if c.unsynced == nil {
		return nil
	}
	if err := c.SyncIno(ctx, ino); err != nil {
		return &os.PathError{Op: "sync", Path: name, Err: err}
	}
	return nil
}

// Commit commits the file's buffered writes, so that every open after it,
// anywhere, sees them (close-to-open), as Sync does, but without waiting
// for durability in DurabilityPOSIX: what close(2) does. In
// DurabilityStrict it is Sync.
func (f *File) Commit() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check("commit", false); err != nil {
		return err
	}
	if err := f.flushLocked(); err != nil {
		return f.fail("commit", err)
	}
	return nil
}

// Durability returns the mode the client was dialed with.
func (c *Client) Durability() Durability {
	if c.unsynced == nil {
		return DurabilityStrict
	}
	return DurabilityPOSIX
}
