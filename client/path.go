package client

import (
	"context"
	"errors"
	"path"
	"strings"
	"syscall"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// Rename flags, as Linux renameat2.
const (
	RenameNoReplace = uint32(pb.RenameFlag_RENAME_NOREPLACE)
	RenameExchange  = uint32(pb.RenameFlag_RENAME_EXCHANGE)
)

// Xattr flags, as Linux setxattr.
const (
	XattrCreate  = uint32(pb.XattrFlag_XATTR_CREATE)
	XattrReplace = uint32(pb.XattrFlag_XATTR_REPLACE)
)

// Stat returns the attributes of the node at p, following symlinks.
func (c *Client) Stat(ctx context.Context, p string) (*FileInfo, error) {
	return c.resolve(ctx, "stat", p, false)
}

// Lstat is Stat without following a symlink in the last component.
func (c *Client) Lstat(ctx context.Context, p string) (*FileInfo, error) {
	return c.resolve(ctx, "stat", p, true)
}

func (c *Client) resolve(ctx context.Context, op, p string, nofollow bool) (*FileInfo, error) {
	var r pb.AttrReply
	if err := c.call(ctx, pb.Method_RESOLVE, &pb.NodeRequest{Path: p, Nofollow: nofollow}, &r, op, p); err != nil {
		return nil, err
	}
	return newFileInfo(path.Base(p), r.Attr), nil
}

// Mkdir creates directory p with permission bits perm.
func (c *Client) Mkdir(ctx context.Context, p string, perm uint32) (*FileInfo, error) {
	return c.create(ctx, pb.Method_MKDIR, "mkdir", &pb.CreateRequest{Path: p, Mode: perm})
}

// MkdirAll creates directory p and any missing parents, like os.MkdirAll.
func (c *Client) MkdirAll(ctx context.Context, p string, perm uint32) error {
	fi, err := c.Stat(ctx, p)
	if err == nil {
		if !fi.IsDir() {
			return &pathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if !errors.Is(err, syscall.ENOENT) {
		return err
	}
	if parent := path.Dir(strings.TrimRight(p, "/")); parent != p && parent != "/" {
		if err := c.MkdirAll(ctx, parent, perm); err != nil {
			return err
		}
	}
	if _, err := c.Mkdir(ctx, p, perm); err != nil && !errors.Is(err, syscall.EEXIST) {
		return err
	}
	return nil
}

// Create creates an empty regular file p with permission bits perm; it
// fails with EEXIST if p exists.
func (c *Client) Create(ctx context.Context, p string, perm uint32) (*FileInfo, error) {
	return c.Mknod(ctx, p, syscall.S_IFREG|perm&0o7777, 0)
}

// Mknod creates a regular file, fifo, socket or device node p; mode holds
// the type bits and permission bits.
func (c *Client) Mknod(ctx context.Context, p string, mode, rdev uint32) (*FileInfo, error) {
	return c.create(ctx, pb.Method_MKNOD, "mknod", &pb.CreateRequest{Path: p, Mode: mode, Rdev: rdev})
}

// Symlink creates symlink p pointing at target.
func (c *Client) Symlink(ctx context.Context, target, p string) (*FileInfo, error) {
	return c.create(ctx, pb.Method_SYMLINK, "symlink", &pb.CreateRequest{Path: p, Target: target})
}

func (c *Client) create(ctx context.Context, m pb.Method, op string, req *pb.CreateRequest) (*FileInfo, error) {
	var r pb.AttrReply
	if err := c.call(ctx, m, req, &r, op, req.Path); err != nil {
		return nil, err
	}
	return newFileInfo(path.Base(req.Path), r.Attr), nil
}

// Link creates p as a new hard link to the node at oldpath.
func (c *Client) Link(ctx context.Context, oldpath, p string) (*FileInfo, error) {
	var r pb.AttrReply
	if err := c.call(ctx, pb.Method_LINK, &pb.LinkRequest{Path: oldpath, NewPath: p}, &r, "link", p); err != nil {
		return nil, err
	}
	return newFileInfo(path.Base(p), r.Attr), nil
}

// Unlink removes the non-directory p.
func (c *Client) Unlink(ctx context.Context, p string) error {
	return c.call(ctx, pb.Method_UNLINK, &pb.EntryRequest{Path: p}, nil, "unlink", p)
}

// Rmdir removes the empty directory p.
func (c *Client) Rmdir(ctx context.Context, p string) error {
	return c.call(ctx, pb.Method_RMDIR, &pb.EntryRequest{Path: p}, nil, "rmdir", p)
}

// Remove removes p, a file or an empty directory, like os.Remove.
func (c *Client) Remove(ctx context.Context, p string) error {
	err := c.Unlink(ctx, p)
	if errors.Is(err, syscall.EISDIR) {
		err = c.Rmdir(ctx, p)
	}
	if err != nil {
		return &pathError{Op: "remove", Path: p, Err: errnoOf(err)}
	}
	return nil
}

// RemoveAll removes p and everything below it, like os.RemoveAll; a p that
// does not exist is not an error.
func (c *Client) RemoveAll(ctx context.Context, p string) error {
	fi, err := c.Lstat(ctx, p)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		for {
			ents, _, eof, err := c.ReadDirPage(ctx, p, "", 1024, false)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if err := c.RemoveAll(ctx, path.Join(p, e.Name())); err != nil {
					return err
				}
			}
			if eof {
				break
			}
		}
		if err := c.Rmdir(ctx, p); err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
		return nil
	}
	if err := c.Unlink(ctx, p); err != nil && !errors.Is(err, syscall.ENOENT) {
		return err
	}
	return nil
}

// Rename renames oldpath to p, replacing p if it exists.
func (c *Client) Rename(ctx context.Context, oldpath, p string) error {
	return c.RenameFlags(ctx, oldpath, p, 0)
}

// RenameFlags is Rename with renameat2 flags (RenameNoReplace,
// RenameExchange).
func (c *Client) RenameFlags(ctx context.Context, oldpath, p string, flags uint32) error {
	return c.call(ctx, pb.Method_RENAME, &pb.RenameRequest{Path: oldpath, NewPath: p, Flags: flags}, nil, "rename", oldpath)
}

// Readlink returns the target of symlink p.
func (c *Client) Readlink(ctx context.Context, p string) (string, error) {
	var r pb.ReadlinkReply
	if err := c.call(ctx, pb.Method_READLINK, &pb.NodeRequest{Path: p}, &r, "readlink", p); err != nil {
		return "", err
	}
	return r.Target, nil
}

// ReadDir returns every entry of directory p, sorted by name, with
// attributes.
func (c *Client) ReadDir(ctx context.Context, p string) ([]*DirEntry, error) {
	var all []*DirEntry
	cursor := ""
	for {
		ents, next, eof, err := c.ReadDirPage(ctx, p, cursor, 0, true)
		if err != nil {
			return nil, err
		}
		all = append(all, ents...)
		if eof {
			return all, nil
		}
		cursor = next
	}
}

// ReadDirPage returns up to limit entries of directory p (0 = the server's
// default) whose names sort after cursor, the cursor of the next page, and
// whether the listing is complete.
func (c *Client) ReadDirPage(ctx context.Context, p, cursor string, limit uint32, attrs bool) ([]*DirEntry, string, bool, error) {
	return c.readdir(ctx, &pb.ReaddirRequest{Path: p, Cursor: cursor, Limit: limit, Attrs: attrs}, p)
}

func (c *Client) readdir(ctx context.Context, req *pb.ReaddirRequest, name string) ([]*DirEntry, string, bool, error) {
	var r pb.ReaddirReply
	if err := c.call(ctx, pb.Method_READDIR, req, &r, "readdir", name); err != nil {
		return nil, "", false, err
	}
	ents := make([]*DirEntry, len(r.Entries))
	for i, e := range r.Entries {
		ents[i] = &DirEntry{name: e.Name, ino: Ino(e.Ino), typ: e.Type}
		if e.Attr != nil {
			ents[i].info = newFileInfo(e.Name, e.Attr)
		}
	}
	return ents, r.NextCursor, r.Eof, nil
}

// Chmod sets the permission bits (and setuid, setgid, sticky) of p.
func (c *Client) Chmod(ctx context.Context, p string, mode uint32) (*FileInfo, error) {
	return c.setattr(ctx, "chmod", &pb.SetattrRequest{Path: p, Valid: uint32(pb.SetattrMask_SETATTR_MODE), Mode: mode})
}

// Chown sets the owner and group of p; a negative id leaves it unchanged.
func (c *Client) Chown(ctx context.Context, p string, uid, gid int64) (*FileInfo, error) {
	req := &pb.SetattrRequest{Path: p}
	if uid >= 0 {
		req.Valid |= uint32(pb.SetattrMask_SETATTR_UID)
		req.Uid = uint32(uid)
	}
	if gid >= 0 {
		req.Valid |= uint32(pb.SetattrMask_SETATTR_GID)
		req.Gid = uint32(gid)
	}
	return c.setattr(ctx, "chown", req)
}

// Chtimes sets the access and modification times of p.
func (c *Client) Chtimes(ctx context.Context, p string, atime, mtime time.Time) (*FileInfo, error) {
	return c.setattr(ctx, "chtimes", &pb.SetattrRequest{
		Path: p, Valid: uint32(pb.SetattrMask_SETATTR_ATIME | pb.SetattrMask_SETATTR_MTIME),
		AtimeNs: atime.UnixNano(), MtimeNs: mtime.UnixNano(),
	})
}

// Touch sets the access and modification times of p to the server's now.
func (c *Client) Touch(ctx context.Context, p string) (*FileInfo, error) {
	return c.setattr(ctx, "touch", &pb.SetattrRequest{
		Path: p, Valid: uint32(pb.SetattrMask_SETATTR_ATIME_NOW | pb.SetattrMask_SETATTR_MTIME_NOW),
	})
}

// Truncate sets the size of regular file p.
func (c *Client) Truncate(ctx context.Context, p string, size uint64) (*FileInfo, error) {
	return c.setattr(ctx, "truncate", &pb.SetattrRequest{Path: p, Valid: uint32(pb.SetattrMask_SETATTR_SIZE), Size: size})
}

func (c *Client) setattr(ctx context.Context, op string, req *pb.SetattrRequest) (*FileInfo, error) {
	var r pb.AttrReply
	name := req.Path
	if name == "" {
		name = inoName(Ino(req.Ino))
	}
	if err := c.call(ctx, pb.Method_SETATTR, req, &r, op, name); err != nil {
		return nil, err
	}
	return newFileInfo(path.Base(name), r.Attr), nil
}

// Statfs is the file system's capacity and use.
type Statfs struct {
	TotalBytes, UsedBytes   uint64 // capacity and use, in bytes
	TotalInodes, UsedInodes uint64 // capacity and use, in nodes
	BlockSize, MaxName      uint32 // preferred I/O size; longest name
	// What the trash holds, counted in the use above: nodes, and bytes of
	// the regular files among them.
	TrashFiles, TrashBytes uint64
}

// Statfs returns the capacity and use of the file system holding p.
func (c *Client) Statfs(ctx context.Context, p string) (Statfs, error) {
	var r pb.StatfsReply
	if err := c.call(ctx, pb.Method_STATFS, &pb.NodeRequest{Path: p}, &r, "statfs", p); err != nil {
		return Statfs{}, err
	}
	return statfsOf(&r), nil
}

func statfsOf(r *pb.StatfsReply) Statfs {
	return Statfs{TotalBytes: r.TotalBytes, UsedBytes: r.UsedBytes, TotalInodes: r.TotalInodes, UsedInodes: r.UsedInodes,
		BlockSize: r.BlockSize, MaxName: r.MaxName, TrashFiles: r.TrashFiles, TrashBytes: r.TrashBytes}
}

// Summary is a recursive content summary, like `hadoop fs -count`.
type Summary struct {
	Dirs, Files, Bytes uint64 // directories, other nodes, and bytes of regular files
}

// Summary counts the directories, files and bytes below p (p included).
func (c *Client) Summary(ctx context.Context, p string) (Summary, error) {
	var r pb.SummaryReply
	if err := c.call(ctx, pb.Method_SUMMARY, &pb.NodeRequest{Path: p}, &r, "summary", p); err != nil {
		return Summary{}, err
	}
	return Summary{r.Dirs, r.Files, r.Bytes}, nil
}

// GetXattr returns the value of extended attribute name of p.
func (c *Client) GetXattr(ctx context.Context, p, name string) ([]byte, error) {
	var r pb.XattrReply
	if err := c.call(ctx, pb.Method_GETXATTR, &pb.XattrRequest{Path: p, Name: name}, &r, "getxattr", p); err != nil {
		return nil, err
	}
	return r.Value, nil
}

// SetXattr sets extended attribute name of p; flags may be XattrCreate or
// XattrReplace.
func (c *Client) SetXattr(ctx context.Context, p, name string, value []byte, flags uint32) error {
	return c.call(ctx, pb.Method_SETXATTR, &pb.XattrRequest{Path: p, Name: name, Value: value, Flags: flags}, nil, "setxattr", p)
}

// ListXattr returns the names of p's extended attributes.
func (c *Client) ListXattr(ctx context.Context, p string) ([]string, error) {
	var r pb.XattrListReply
	if err := c.call(ctx, pb.Method_LISTXATTR, &pb.NodeRequest{Path: p}, &r, "listxattr", p); err != nil {
		return nil, err
	}
	return r.Names, nil
}

// RemoveXattr removes extended attribute name of p.
func (c *Client) RemoveXattr(ctx context.Context, p, name string) error {
	return c.call(ctx, pb.Method_REMOVEXATTR, &pb.XattrRequest{Path: p, Name: name}, nil, "removexattr", p)
}
