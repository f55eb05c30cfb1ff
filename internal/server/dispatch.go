package server

import (
	"errors"
	"strings"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// newRequest returns an empty request message for method, or nil if the
// method is unknown.
func newRequest(m pb.Method) proto.Message {
	switch m {
	case pb.Method_NULL:
		return &pb.NullRequest{}
	case pb.Method_LOOKUP, pb.Method_UNLINK, pb.Method_RMDIR:
		return &pb.EntryRequest{}
	case pb.Method_GETATTR, pb.Method_READLINK, pb.Method_RESOLVE, pb.Method_STATFS,
		pb.Method_SUMMARY, pb.Method_LISTXATTR:
		return &pb.NodeRequest{}
	case pb.Method_SETATTR:
		return &pb.SetattrRequest{}
	case pb.Method_MKDIR, pb.Method_MKNOD, pb.Method_SYMLINK:
		return &pb.CreateRequest{}
	case pb.Method_RENAME:
		return &pb.RenameRequest{}
	case pb.Method_LINK:
		return &pb.LinkRequest{}
	case pb.Method_READDIR:
		return &pb.ReaddirRequest{}
	case pb.Method_GETXATTR, pb.Method_SETXATTR, pb.Method_REMOVEXATTR:
		return &pb.XattrRequest{}
	case pb.Method_VOLUME, pb.Method_CLOSE:
		return &pb.NodeRequest{}
	case pb.Method_ALLOC_SLICES:
		return &pb.AllocSlicesRequest{}
	case pb.Method_COMMIT:
		return &pb.CommitRequest{}
	case pb.Method_READ_CHUNKS:
		return &pb.ReadChunksRequest{}
	case pb.Method_OPEN:
		return &pb.OpenRequest{}
	case pb.Method_COMPACT:
		return &pb.CompactRequest{}
	case pb.Method_LIST_GARBAGE, pb.Method_LIST_SLICES:
		return &pb.ListSlicesRequest{}
	case pb.Method_PURGE:
		return &pb.PurgeRequest{}
	}
	return nil
}

// newReply returns an empty reply message of a mutation, to decode a
// retry-cache entry into.
func newReply(m pb.Method) proto.Message {
	switch m {
	case pb.Method_ALLOC_SLICES:
		return &pb.AllocSlicesReply{}
	}
	return &pb.AttrReply{}
}

// isMutation reports whether method changes the namespace, and so is
// logged and answered from the retry cache when retried.
func isMutation(m pb.Method) bool {
	switch m {
	case pb.Method_SETATTR, pb.Method_MKDIR, pb.Method_MKNOD, pb.Method_UNLINK, pb.Method_RMDIR,
		pb.Method_RENAME, pb.Method_LINK, pb.Method_SYMLINK, pb.Method_SETXATTR, pb.Method_REMOVEXATTR,
		pb.Method_ALLOC_SLICES, pb.Method_COMMIT, pb.Method_COMPACT, pb.Method_PURGE:
		return true
	}
	return false
}

// statusOf maps an engine error to the reply status: its errno, or EIO for
// anything that is not one.
func statusOf(err error) uint32 {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return uint32(errno)
	}
	return uint32(syscall.EIO)
}

// apply runs one decoded request against the engine at time now. It is
// called by the apply loop only, and by recovery before the loop starts.
func apply(e *engine.Engine, c engine.Cred, m pb.Method, req proto.Message, now int64) (uint32, proto.Message) {
	reply, err := dispatch(e, c, m, req, now)
	if err != nil {
		return statusOf(err), nil
	}
	return 0, reply
}

func dispatch(e *engine.Engine, c engine.Cred, m pb.Method, req proto.Message, now int64) (proto.Message, error) {
	switch m {
	case pb.Method_LOOKUP:
		r := req.(*pb.EntryRequest)
		parent, name, err := entry(e, c, r.Parent, r.Path, r.Name)
		if err != nil {
			return nil, err
		}
		return attrReply(e.Lookup(c, parent, name))
	case pb.Method_GETATTR, pb.Method_RESOLVE:
		r := req.(*pb.NodeRequest)
		if r.Path != "" {
			return attrReply(e.Resolve(c, r.Path, !r.Nofollow))
		}
		return attrReply(e.GetAttr(engine.Ino(r.Ino)))
	case pb.Method_SETATTR:
		r := req.(*pb.SetattrRequest)
		ino, err := node(e, c, r.Ino, r.Path, true)
		if err != nil {
			return nil, err
		}
		return attrReply(e.SetAttr(c, ino, engine.SetAttr{
			Valid: r.Valid, Mode: r.Mode, UID: r.Uid, GID: r.Gid, Size: r.Size,
			Atime: r.AtimeNs, Mtime: r.MtimeNs,
		}, now))
	case pb.Method_MKDIR, pb.Method_MKNOD, pb.Method_SYMLINK:
		r := req.(*pb.CreateRequest)
		parent, name, err := entry(e, c, r.Parent, r.Path, r.Name)
		if err != nil {
			return nil, err
		}
		switch m {
		case pb.Method_MKDIR:
			return attrReply(e.Mkdir(c, parent, name, r.Mode, now))
		case pb.Method_MKNOD:
			return attrReply(e.Mknod(c, parent, name, r.Mode, r.Rdev, now))
		default:
			return attrReply(e.Symlink(c, parent, name, r.Target, now))
		}
	case pb.Method_UNLINK, pb.Method_RMDIR:
		r := req.(*pb.EntryRequest)
		parent, name, err := entry(e, c, r.Parent, r.Path, r.Name)
		if err != nil {
			return nil, err
		}
		if m == pb.Method_UNLINK {
			return nil, e.Unlink(c, parent, name, now)
		}
		if r.Path != "" && strings.Trim(r.Path, "/") == "" {
			return nil, syscall.EBUSY // the root has no entry to remove
		}
		return nil, e.Rmdir(c, parent, name, now)
	case pb.Method_RENAME:
		r := req.(*pb.RenameRequest)
		parent, name, err := entry(e, c, r.Parent, r.Path, r.Name)
		if err != nil {
			return nil, err
		}
		newParent, newName, err := entry(e, c, r.NewParent, r.NewPath, r.NewName)
		if err != nil {
			return nil, err
		}
		return nil, e.Rename(c, parent, name, newParent, newName, r.Flags, now)
	case pb.Method_LINK:
		r := req.(*pb.LinkRequest)
		ino, err := node(e, c, r.Ino, r.Path, false)
		if err != nil {
			return nil, err
		}
		newParent, newName, err := entry(e, c, r.NewParent, r.NewPath, r.NewName)
		if err != nil {
			return nil, err
		}
		return attrReply(e.Link(c, ino, newParent, newName, now))
	case pb.Method_READLINK:
		r := req.(*pb.NodeRequest)
		ino, err := node(e, c, r.Ino, r.Path, false)
		if err != nil {
			return nil, err
		}
		target, err := e.Readlink(ino)
		return &pb.ReadlinkReply{Target: target}, err
	case pb.Method_READDIR:
		r := req.(*pb.ReaddirRequest)
		ino, err := node(e, c, r.Ino, r.Path, true)
		if err != nil {
			return nil, err
		}
		return readdirReply(e.Readdir(c, ino, r.Cursor, int(min(r.Limit, 1<<16)), r.Attrs))
	case pb.Method_STATFS:
		s := e.Statfs()
		return &pb.StatfsReply{
			TotalBytes: s.TotalBytes, UsedBytes: s.UsedBytes, TotalInodes: s.TotalInodes,
			UsedInodes: s.UsedInodes, BlockSize: s.BlockSize, MaxName: s.MaxName,
		}, nil
	case pb.Method_SUMMARY:
		r := req.(*pb.NodeRequest)
		ino, err := node(e, c, r.Ino, r.Path, !r.Nofollow)
		if err != nil {
			return nil, err
		}
		s, err := e.Summary(c, ino)
		return &pb.SummaryReply{Dirs: s.Dirs, Files: s.Files, Bytes: s.Bytes}, err
	case pb.Method_GETXATTR, pb.Method_SETXATTR, pb.Method_REMOVEXATTR:
		r := req.(*pb.XattrRequest)
		ino, err := node(e, c, r.Ino, r.Path, true)
		if err != nil {
			return nil, err
		}
		switch m {
		case pb.Method_GETXATTR:
			v, err := e.GetXattr(c, ino, r.Name)
			return &pb.XattrReply{Value: v}, err
		case pb.Method_SETXATTR:
			return nil, e.SetXattr(c, ino, r.Name, r.Value, r.Flags, now)
		default:
			return nil, e.RemoveXattr(c, ino, r.Name, now)
		}
	case pb.Method_LISTXATTR:
		r := req.(*pb.NodeRequest)
		ino, err := node(e, c, r.Ino, r.Path, !r.Nofollow)
		if err != nil {
			return nil, err
		}
		names, err := e.ListXattr(c, ino)
		return &pb.XattrListReply{Names: names}, err
	}
	return dispatchData(e, c, m, req, now)
}

// node resolves a request's node: by path if one is given, else by inode.
func node(e *engine.Engine, c engine.Cred, ino uint64, path string, follow bool) (engine.Ino, error) {
	if path != "" {
		return e.ResolveIno(c, path, follow)
	}
	if ino == 0 {
		return 0, syscall.EINVAL
	}
	return engine.Ino(ino), nil
}

// entry resolves a request's directory entry: by path if one is given,
// else by parent inode and name.
func entry(e *engine.Engine, c engine.Cred, parent uint64, path, name string) (engine.Ino, string, error) {
	if path != "" {
		return e.ResolveParent(c, path)
	}
	if parent == 0 {
		return 0, "", syscall.EINVAL
	}
	return engine.Ino(parent), name, nil
}

func attrReply(a engine.Attr, err error) (proto.Message, error) {
	if err != nil {
		return nil, err
	}
	return &pb.AttrReply{Attr: toPB(&a)}, nil
}

func readdirReply(ents []engine.Dirent, next string, eof bool, err error) (proto.Message, error) {
	if err != nil {
		return nil, err
	}
	r := &pb.ReaddirReply{Entries: make([]*pb.Dirent, len(ents)), NextCursor: next, Eof: eof}
	for i := range ents {
		d := &pb.Dirent{Name: ents[i].Name, Ino: uint64(ents[i].Ino), Type: ents[i].Type}
		if ents[i].Attr.Ino != 0 {
			d.Attr = toPB(&ents[i].Attr)
		}
		r.Entries[i] = d
	}
	return r, nil
}

// toPB converts engine attributes to their wire form.
func toPB(a *engine.Attr) *pb.Attr {
	return &pb.Attr{
		Ino: uint64(a.Ino), Mode: a.Mode, Uid: a.UID, Gid: a.GID, Nlink: a.Nlink, Size: a.Size,
		AtimeNs: a.Atime, MtimeNs: a.Mtime, CtimeNs: a.Ctime, Rdev: a.Rdev,
		Blocks: (a.Size + 511) / 512,
	}
}
