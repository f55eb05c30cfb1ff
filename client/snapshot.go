package client

import (
	"context"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// SnapshotDir is the name under which a directory shows its snapshots:
// snapshot NAME of directory PATH reads at PATH/.snapshot/NAME, read only
// (every change there fails with EROFS).
const SnapshotDir = ".snapshot"

// Snapshot is one snapshot of a directory.
type Snapshot struct {
	Name    string    // its name under PATH/.snapshot
	Dir     Ino       // the directory it was taken of
	Ino     Ino       // its root, PATH/.snapshot/NAME
	Created time.Time // when it was taken
	Nodes   uint64    // nodes in it, its root included
	Bytes   uint64    // bytes of its regular files (their data is shared, not copied)
}

func newSnapshot(s *pb.SnapshotInfo) Snapshot {
	return Snapshot{
		Name: s.GetName(), Dir: Ino(s.GetDir()), Ino: Ino(s.GetIno()),
		Created: time.Unix(0, s.GetCreatedNs()).UTC(), Nodes: s.GetNodes(), Bytes: s.GetBytes(),
	}
}

// SnapshotCreate takes snapshot name of directory p: a read-only copy of
// its subtree at p/.snapshot/name, whose files share their data with p's
// until either side changes. Only p's owner or root may (EPERM); a name
// already taken is EEXIST.
func (c *Client) SnapshotCreate(ctx context.Context, p, name string) (Snapshot, error) {
	var r pb.SnapshotReply
	if err := c.call(ctx, pb.Method_SNAPSHOT_CREATE, &pb.SnapshotRequest{Path: p, Name: name}, &r, "snapshot create", p); err != nil {
		return Snapshot{}, err
	}
	return newSnapshot(r.Snapshot), nil
}

// SnapshotList returns the snapshots of directory p, by name.
func (c *Client) SnapshotList(ctx context.Context, p string) ([]Snapshot, error) {
	var r pb.SnapshotListReply
	if err := c.call(ctx, pb.Method_SNAPSHOT_LIST, &pb.NodeRequest{Path: p}, &r, "snapshot ls", p); err != nil {
		return nil, err
	}
	out := make([]Snapshot, len(r.Snapshots))
	for i, s := range r.Snapshots {
		out[i] = newSnapshot(s)
	}
	return out, nil
}

// SnapshotRemove removes snapshot name of directory p; the data nothing
// else names becomes garbage. Only p's owner or root may (EPERM); an
// unknown name is ENOENT.
func (c *Client) SnapshotRemove(ctx context.Context, p, name string) error {
	return c.call(ctx, pb.Method_SNAPSHOT_REMOVE, &pb.SnapshotRequest{Path: p, Name: name}, nil, "snapshot rm", p)
}

// SnapshotChange is one difference between two states of a directory: Op
// "+" for an entry only the later state has, "-" for one only the earlier
// has, "M" for one whose node differs; Path is relative to the directory
// ("." is the directory itself, "./a/b" below it).
type SnapshotChange struct {
	Op   string `json:"op"`   // "+", "-" or "M"
	Path string `json:"path"` // relative to the directory
	Type string `json:"type"` // file, dir, symlink, fifo, socket, char, block
}

// SnapshotDiff compares snapshot from of directory p with snapshot to, or
// with p as it is now when to is "". truncated says that more changes
// exist than one reply holds.
func (c *Client) SnapshotDiff(ctx context.Context, p, from, to string) (changes []SnapshotChange, truncated bool, err error) {
	var r pb.SnapshotDiffReply
	req := &pb.SnapshotDiffRequest{Path: p, Name: from, Name2: to}
	if err := c.call(ctx, pb.Method_SNAPSHOT_DIFF, req, &r, "snapshot diff", p); err != nil {
		return nil, false, err
	}
	changes = make([]SnapshotChange, len(r.Changes))
	for i, ch := range r.Changes {
		changes[i] = SnapshotChange{Op: ch.Op, Path: ch.Path, Type: typeName(ch.Type)}
	}
	return changes, r.Truncated, nil
}

// typeName names the file type bits of a mode.
func typeName(mode uint32) string {
	switch mode & 0o170000 {
	case 0o040000:
		return "dir"
	case 0o100000:
		return "file"
	case 0o120000:
		return "symlink"
	case 0o010000:
		return "fifo"
	case 0o140000:
		return "socket"
	case 0o020000:
		return "char"
	case 0o060000:
		return "block"
	}
	return "unknown"
}
