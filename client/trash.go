package client

import (
	"context"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// TrashEntry is one thing a partition's trash holds: an entry of one of
// its hour directories (/.trash/<hour>/<parent>-<ino>-<name>).
type TrashEntry struct {
	Hour    string    // the hour of the removal, 2006-01-02-15 (UTC)
	Name    string    // the entry's name in the hour directory
	Ino     Ino       // the node
	Parent  Ino       // the directory it was removed from
	Orig    string    // its name there
	Path    string    // its original path; "" if its directory is gone
	Removed time.Time // when it was removed (its ctime)
	Size    uint64    // its own size
	Dir     bool      // a directory
	Files   uint64    // nodes in it, itself included
	Bytes   uint64    // bytes of the regular files in it
}

// Trash is what a partition's trash holds.
type Trash struct {
	Days    int          // how long the trash keeps what it holds; 0: off
	Files   uint64       // nodes it holds in all
	Bytes   uint64       // bytes of the regular files it holds
	Entries []TrashEntry // by hour and name
}

// TrashList returns what the trash of the partition that holds p holds.
// Only root may.
func (c *Client) TrashList(ctx context.Context, p string) (Trash, error) {
	var r pb.TrashListReply
	if err := c.call(ctx, pb.Method_TRASH_LIST, &pb.NodeRequest{Path: p}, &r, "trash ls", p); err != nil {
		return Trash{}, err
	}
	out := Trash{Days: int(r.Days), Files: r.Files, Bytes: r.Bytes, Entries: make([]TrashEntry, len(r.Entries))}
	for i, e := range r.Entries {
		a := e.GetAttr()
		out.Entries[i] = TrashEntry{
			Hour: e.Hour, Name: e.Name, Ino: Ino(e.Ino), Parent: Ino(e.Parent), Orig: e.Orig, Path: e.Path,
			Removed: time.Unix(0, a.GetCtimeNs()).UTC(), Size: a.GetSize(), Dir: a.GetMode()&0o170000 == 0o040000,
			Files: e.Files, Bytes: e.Bytes,
		}
	}
	return out, nil
}

// TrashRestore puts entry name of hour directory hour of the trash of the
// partition that holds p back where it was (a whole hour with name ""),
// with the directories of its path that are in the trash too. It returns
// the paths restored and, for a partial restore, what could not be (one
// error a line). A name taken again fails with EEXIST
// ("restore /a/b: file exists"). Only root may.
func (c *Client) TrashRestore(ctx context.Context, p, hour, name string) (paths []string, failed string, err error) {
	var r pb.TrashRestoreReply
	req := &pb.TrashRestoreRequest{Path: p, Hour: hour, Name: name}
	if err := c.call(ctx, pb.Method_TRASH_RESTORE, req, &r, "trash restore", hour+"/"+name); err != nil {
		return nil, "", err
	}
	return r.Paths, r.Failed, nil
}

// TrashPurge frees what the trash of the partition that holds p holds
// from the hours that ended olderThan or more ago (by the partition's
// clock), or everything with all, and returns the nodes and bytes freed.
// Only root may.
func (c *Client) TrashPurge(ctx context.Context, p string, olderThan time.Duration, all bool) (files, bytes uint64, err error) {
	var r pb.TrashPurgeReply
	req := &pb.TrashPurgeRequest{Path: p, OlderThanNs: int64(olderThan), All: all}
	if err := c.call(ctx, pb.Method_TRASH_PURGE, req, &r, "trash purge", p); err != nil {
		return 0, 0, err
	}
	return r.Files, r.Bytes, nil
}
