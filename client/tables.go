package client

import (
	"context"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// The federation tables, kept by the root partition (partition 0) and read
// by every router: the mount table (which virtual partition holds which
// subtree of the namespace) and the routing table (which metadata servers
// serve each virtual partition). See docs/router.md. These calls work
// through a router or straight against the root partition's server.

// MountEntry mounts the subtree at Prefix from the path Target inside
// virtual partition VPart. ReadOnly refuses changes below Prefix.
type MountEntry struct {
	Prefix   string `json:"prefix"`    // absolute path in the namespace the clients see
	VPart    uint16 `json:"vpart"`     // the virtual partition that holds the subtree
	Target   string `json:"target"`    // absolute path of the subtree inside VPart
	ReadOnly bool   `json:"read_only"` // refuse changes below Prefix
}

// Route names the metadata servers (one per replica) serving a virtual
// partition.
type Route struct {
	VPart uint16   `json:"vpart"` // the virtual partition
	Addrs []string `json:"addrs"` // its servers' addresses, one per replica
}

// Tables are both tables at one version. Every change to either increments
// Version.
type Tables struct {
	Version uint64       `json:"version"` // incremented by every change
	Mounts  []MountEntry `json:"mounts"`  // sorted by prefix
	Routes  []Route      `json:"routes"`  // sorted by virtual partition
}

// Route returns the addresses serving vp, or nil if it has no route.
func (t *Tables) Route(vp uint16) []string {
	for _, r := range t.Routes {
		if r.VPart == vp {
			return r.Addrs
		}
	}
	return nil
}

// TablesUpdate is one atomic edit of the tables: RemoveMounts apply first,
// then SetMounts (adding, or replacing by prefix), then SetRoutes (a route
// with no addresses removes the virtual partition's route). If
// ExpectedVersion is not 0, the update fails with ESTALE unless the tables
// are at that version, so that a read-modify-write does not overwrite a
// change made meanwhile. Only the superuser may update the tables.
type TablesUpdate struct {
	ExpectedVersion uint64       // 0, or the version the update applies to
	RemoveMounts    []string     // prefixes of mounts to remove
	SetMounts       []MountEntry // mounts to add or replace
	SetRoutes       []Route      // routes to set (no addresses: remove)
}

// Tables returns the current tables.
func (c *Client) Tables(ctx context.Context) (*Tables, error) {
	return c.WatchTables(ctx, 0, 0)
}

// WatchTables waits until the tables' version differs from known, for at
// most wait, and returns them: changed, or as they were when wait passed
// (same version). It returns at once if the version already differs or
// wait is 0. A router calls it in a loop to follow the tables without
// polling; the server caps wait at a minute, and so does the client at
// the per-attempt timeout (Options.CallTimeout) less a second, so that the
// wait is not taken for a lost reply.
func (c *Client) WatchTables(ctx context.Context, known uint64, wait time.Duration) (*Tables, error) {
	if limit := c.callTimeout - time.Second; wait > limit {
		wait = max(limit, 0)
	}
	req := &pb.TablesRequest{Ino: uint64(RootIno), KnownVersion: known, WaitMs: uint32(wait / time.Millisecond)}
	var r pb.TablesReply
	if err := c.call(ctx, pb.Method_TABLES_GET, req, &r, "tables", "/"); err != nil {
		return nil, err
	}
	return tablesFromPB(&r), nil
}

// UpdateTables applies u and returns the tables it produced. A refused
// update's error carries the server's explanation (see DetailError);
// errors.Is matches its errno: ESTALE for a version mismatch, EINVAL for an
// invalid result, ENOENT for removing what is not there, EPERM for a
// caller other than the superuser.
func (c *Client) UpdateTables(ctx context.Context, u TablesUpdate) (*Tables, error) {
	req := &pb.TablesUpdate{Ino: uint64(RootIno), ExpectedVersion: u.ExpectedVersion, RemoveMounts: u.RemoveMounts}
	for _, m := range u.SetMounts {
		req.SetMounts = append(req.SetMounts, &pb.MountEntry{Prefix: m.Prefix, Vpart: uint32(m.VPart), Target: m.Target, ReadOnly: m.ReadOnly})
	}
	for _, r := range u.SetRoutes {
		req.SetRoutes = append(req.SetRoutes, &pb.Route{Vpart: uint32(r.VPart), Addrs: r.Addrs})
	}
	var r pb.TablesReply
	if err := c.call(ctx, pb.Method_TABLES_UPDATE, req, &r, "update tables", "/"); err != nil {
		return nil, err
	}
	return tablesFromPB(&r), nil
}

func tablesFromPB(r *pb.TablesReply) *Tables {
	t := &Tables{Version: r.Version, Mounts: make([]MountEntry, 0, len(r.Mounts)), Routes: make([]Route, 0, len(r.Routes))}
	for _, m := range r.Mounts {
		t.Mounts = append(t.Mounts, MountEntry{Prefix: m.Prefix, VPart: uint16(m.Vpart), Target: m.Target, ReadOnly: m.ReadOnly})
	}
	for _, rt := range r.Routes {
		t.Routes = append(t.Routes, Route{VPart: uint16(rt.Vpart), Addrs: rt.Addrs})
	}
	return t
}
