package server

import (
	"errors"
	"strings"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/protocol"
)

// methodClass says how the server handles a method.
type methodClass uint8

const (
	classRead     methodClass = iota // applied by the apply stage, not logged (the default, also for unknown methods)
	classMutation                    // applied, logged, and answered from the retry cache when retried
	classSession                     // OPEN, CLOSE: applied, logged, counted per client (state.go)
	classLock                        // answered by the RPC reader from the lock manager (dispatch_locks.go)
	classLocal                       // answered by the RPC reader from no state at all (NULL, VOLUME)
)

// classOf says how the server handles m: the protocol's class of the
// method (internal/protocol), except VOLUME, a read the server answers
// from its configuration alone.
func classOf(m pb.Method) methodClass {
	if m == pb.Method_VOLUME {
		return classLocal
	}
	switch protocol.ClassOf(m) {
	case protocol.ClassMutation:
		return classMutation
	case protocol.ClassSession:
		return classSession
	case protocol.ClassLock:
		return classLock
	case protocol.ClassLocal:
		return classLocal
	}
	return classRead
}

// isMutation reports whether method changes the namespace, and so is
// logged and answered from the retry cache when retried.
func isMutation(m pb.Method) bool { return classOf(m) == classMutation }

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
// A failure's reply is an ErrorDetail when the error says more than its
// errno, nil otherwise.
func apply(e *engine.Engine, c engine.Cred, m pb.Method, req proto.Message, now int64) (uint32, proto.Message) {
	moved := forwardInos(e, req)
	reply, err := dispatch(e, c, m, req, now)
	if err != nil {
		status := statusOf(err)
		if moved != nil && (status == uint32(syscall.ENOENT) || status == uint32(syscall.ESTALE)) {
			return movedReply(moved)
		}
		return status, withRefusal(e, status, errorDetail(err))
	}
	if classOf(m) == classMutation {
		// The trash's collector runs with the logged operations, by their
		// time, so that every replica frees the same hours (trash.go).
		collectTrash(e, now)
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
		return attrReply(e.SetAttr(c, ino, setAttrOf(r), now))
	case pb.Method_MKDIR, pb.Method_MKNOD, pb.Method_SYMLINK:
		r := req.(*pb.CreateRequest)
		parent, name, err := entry(e, c, r.Parent, r.Path, r.Name)
		if err != nil {
			return nil, err
		}
		switch m {
		case pb.Method_MKDIR:
			return attrReply(e.MkdirMasked(c, parent, name, r.Mode, r.Umask, now))
		case pb.Method_MKNOD:
			return attrReply(e.MknodMasked(c, parent, name, r.Mode, r.Rdev, r.Umask, now))
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
		return statfsReply(e, c, req), nil
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
	case pb.Method_TABLES_GET, pb.Method_TABLES_UPDATE:
		return dispatchTables(e, c, m, req)
	case pb.Method_QUOTA_SET, pb.Method_QUOTA_GET, pb.Method_QUOTA_LIST, pb.Method_QUOTA_REMOVE, pb.Method_QUOTA_CHECK, pb.Method_QUOTA_REPAIR:
		return dispatchQuota(e, c, m, req)
	case pb.Method_OWNER_QUOTA_ADJUST, pb.Method_OWNER_QUOTA_SET, pb.Method_OWNER_QUOTA_LIST, pb.Method_OWNER_QUOTA_REMOVE, pb.Method_OWNER_QUOTA_CHECK, pb.Method_OWNER_QUOTA_REPAIR:
		return dispatchOwnerQuota(e, c, m, req)
	case pb.Method_TRASH_LIST, pb.Method_TRASH_RESTORE, pb.Method_TRASH_PURGE:
		return dispatchTrash(e, c, m, req, now)
	case pb.Method_SNAPSHOT_CREATE, pb.Method_SNAPSHOT_LIST, pb.Method_SNAPSHOT_REMOVE, pb.Method_SNAPSHOT_DIFF, pb.Method_CLONE:
		return dispatchSnapshot(e, c, m, req, now)
	case pb.Method_XRENAME_PREPARE_SRC, pb.Method_XRENAME_PREPARE_DST, pb.Method_XRENAME_COMMIT_SRC,
		pb.Method_XRENAME_COMMIT_DST, pb.Method_XRENAME_ABORT, pb.Method_XRENAME_FORGET,
		pb.Method_XRENAME_STATE, pb.Method_XRENAME_LIST:
		return dispatchXRename(e, c, m, req, now)
	}
	if m == pb.Method_CREATE_OPEN {
		return dispatchCreateOpen(e, c, req.(*pb.CreateRequest), now)
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

// setAttrOf converts a SETATTR's changes (its node aside) to the engine's.
func setAttrOf(r *pb.SetattrRequest) engine.SetAttr {
	return engine.SetAttr{
		Valid: r.Valid, Mode: r.Mode, UID: r.Uid, GID: r.Gid, Size: r.Size,
		Atime: r.AtimeNs, Mtime: r.MtimeNs,
	}
}
