package server

// TestModelRPC runs internal/model's op stream against a real server over
// the RPC layer: the path-level ops as the server's path-form requests (so
// the server's own composition of lookups and calls is what is tested),
// the inode-level ones by inode. The server's clock is the op's time, so
// every attribute, times included, must match the model's.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/model"
	"github.com/canopyfs/canopy/internal/rpc"
)

const (
	rpcModelPartition = 7
	rpcModelT0        = 1_000_000
)

func TestModelRPC(t *testing.T) {
	steps, seeds := 2000, 2
	if testing.Short() {
		steps, seeds = 300, 1
	}
	for _, v := range []struct {
		name    string
		names   []string
		compact bool
	}{
		{"small", model.Names, false},
		{"wide-compact", model.WideNames, true},
	} {
		for seed := int64(1); seed <= int64(seeds); seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", v.name, seed), func(t *testing.T) {
				cfg := model.Config{Seed: seed, Steps: steps, Partition: rpcModelPartition, T0: rpcModelT0, Names: v.names, Allow: rpcExpressible}
				var last *rpcTarget
				newTarget := func() model.Target {
					if last != nil {
						last.close() // the shrinker makes one per attempt
					}
					last = newRPCTarget(t, v.compact)
					return last
				}
				if f := model.Run(cfg, newTarget()); f != nil {
					ops, g := model.Shrink(cfg, f.Ops, newTarget)
					t.Fatalf("%v\nshrunk to %d ops (%s):\n%s", f, len(ops), g.Signature(), model.FormatOps(ops))
				}
			})
		}
	}
}

// rpcExpressible refuses the ops the wire cannot carry: an empty path (the
// protocol's "" means "by inode", not the empty path that Linux refuses),
// and inode 0 (it means "by path").
func rpcExpressible(op model.Op) bool {
	switch op.Kind {
	case model.KStatfs:
		return true
	case model.KLink, model.KRename:
		return op.Path != "" && op.Path2 != ""
	}
	if op.Kind.InodeLevel() {
		return op.Ino != 0 && (op.Kind != model.KLinkIno && op.Kind != model.KRenameIno || op.Ino2 != 0)
	}
	return op.Path != ""
}

// rpcTarget is a server over RPC as a model.Target. It belongs to the
// test's goroutine; the server reads clock from its apply loop.
type rpcTarget struct {
	s     *Server
	rc    *rpc.Client
	clock atomic.Int64
}

func (tg *rpcTarget) close() {
	tg.rc.Close()
	tg.s.Close()
}

func newRPCTarget(t *testing.T, compact bool) *rpcTarget {
	tg := &rpcTarget{}
	tg.clock.Store(rpcModelT0)
	s, addr := openAndServe(t, Config{Dir: t.TempDir(), Partition: rpcModelPartition, Clock: tg.clock.Load, CompactEveryBatch: compact})
	rc, err := rpc.Dial(addr, rpc.ClientConfig{OpTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { rc.Close() })
	tg.s, tg.rc = s, rc
	return tg
}

// call sends one request as c; errno is the reply's status.
func (tg *rpcTarget) call(c model.Cred, m pb.Method, req, reply proto.Message) (syscall.Errno, error) {
	data, err := proto.Marshal(req)
	if err != nil {
		return 0, err
	}
	status, out, err := tg.rc.Call(context.Background(), uint16(m), rpc.Cred(c), data)
	if err != nil {
		return 0, fmt.Errorf("%v: %w", m, err)
	}
	if status != 0 {
		return syscall.Errno(status), nil
	}
	if reply != nil {
		if err := proto.Unmarshal(out, reply); err != nil {
			return 0, fmt.Errorf("%v: decode reply: %w", m, err)
		}
	}
	return 0, nil
}

func fromPBAttr(a *pb.Attr) *model.Attr {
	if a == nil {
		return &model.Attr{}
	}
	return &model.Attr{Ino: model.Ino(a.Ino), Mode: a.Mode, UID: a.Uid, GID: a.Gid, Nlink: a.Nlink, Size: a.Size,
		Atime: a.AtimeNs, Mtime: a.MtimeNs, Ctime: a.CtimeNs, Rdev: a.Rdev}
}

// errStop ends a composed op at its first failing call.
var errStop = errors.New("stop")

func (tg *rpcTarget) Apply(op model.Op, now int64) (model.Result, error) {
	if now > 0 {
		tg.clock.Store(now)
	}
	var r model.Result
	var en syscall.Errno
	var err error
	// do runs one call unless an earlier one failed.
	do := func(c model.Cred, m pb.Method, req, reply proto.Message) bool {
		if en != 0 || err != nil {
			return false
		}
		en, err = tg.call(c, m, req, reply)
		return en == 0 && err == nil
	}
	attr := func(c model.Cred, m pb.Method, req proto.Message) {
		var reply pb.AttrReply
		if do(c, m, req, &reply) {
			r.Attr = fromPBAttr(reply.Attr)
		}
	}
	// node resolves op.Path as c and returns its inode.
	node := func(c model.Cred, follow bool) uint64 {
		var reply pb.AttrReply
		if do(c, pb.Method_RESOLVE, &pb.NodeRequest{Path: op.Path, Nofollow: !follow}, &reply) {
			return reply.Attr.GetIno()
		}
		return 0
	}
	readdir := func(c model.Cred, ino uint64) {
		var reply pb.ReaddirReply
		if do(c, pb.Method_READDIR, &pb.ReaddirRequest{Ino: ino, Cursor: op.Cursor, Limit: uint32(op.Limit), Attrs: op.Attrs}, &reply) {
			for _, e := range reply.Entries {
				d := model.Dirent{Name: e.Name, Ino: model.Ino(e.Ino), Type: e.Type}
				if e.Attr != nil {
					d.Attr = *fromPBAttr(e.Attr)
				}
				r.Ents = append(r.Ents, d)
			}
			r.Next, r.EOF = reply.NextCursor, reply.Eof
		}
	}
	summary := func(c model.Cred, ino uint64) {
		var reply pb.SummaryReply
		if do(c, pb.Method_SUMMARY, &pb.NodeRequest{Ino: ino}, &reply) {
			r.Text = fmt.Sprintf("dirs=%d files=%d bytes=%d", reply.Dirs, reply.Files, reply.Bytes)
		}
	}
	listxattr := func(c model.Cred, req *pb.NodeRequest) {
		var reply pb.XattrListReply
		if do(c, pb.Method_LISTXATTR, req, &reply) {
			r.Text = fmt.Sprintf("%q", reply.Names)
			if reply.Names == nil {
				r.Text = "[]"
			}
		}
	}
	getxattr := func(c model.Cred, req *pb.XattrRequest) {
		var reply pb.XattrReply
		if do(c, pb.Method_GETXATTR, req, &reply) {
			r.Text = string(reply.Value)
		}
	}
	readlink := func(ino uint64) {
		var reply pb.ReadlinkReply
		if do(op.Cred, pb.Method_READLINK, &pb.NodeRequest{Ino: ino}, &reply) {
			r.Text = reply.Target
		}
	}
	// xattrNode is the request's node: by path when the call follows (as
	// the server's path form does), else resolved without following.
	xattrNode := func() (uint64, string) {
		if op.Follow {
			return 0, op.Path
		}
		return node(op.Cred, false), ""
	}
	c := op.Cred
	ino, ino2 := uint64(op.Ino), uint64(op.Ino2)
	switch op.Kind {
	case model.KMkdir:
		attr(c, pb.Method_MKDIR, &pb.CreateRequest{Path: op.Path, Mode: op.Mode})
	case model.KMknod:
		attr(c, pb.Method_MKNOD, &pb.CreateRequest{Path: op.Path, Mode: op.Mode, Rdev: op.Rdev})
	case model.KSymlink:
		attr(c, pb.Method_SYMLINK, &pb.CreateRequest{Path: op.Path, Target: op.Target})
	case model.KLink:
		attr(c, pb.Method_LINK, &pb.LinkRequest{Path: op.Path, NewPath: op.Path2})
	case model.KUnlink:
		do(c, pb.Method_UNLINK, &pb.EntryRequest{Path: op.Path}, nil)
	case model.KRmdir:
		do(c, pb.Method_RMDIR, &pb.EntryRequest{Path: op.Path}, nil)
	case model.KRename:
		do(c, pb.Method_RENAME, &pb.RenameRequest{Path: op.Path, NewPath: op.Path2, Flags: op.Flags}, nil)
	case model.KSetAttr:
		s := op.Set
		req := &pb.SetattrRequest{Path: op.Path, Valid: s.Valid, Mode: s.Mode, Uid: s.UID, Gid: s.GID, Size: s.Size, AtimeNs: s.Atime, MtimeNs: s.Mtime}
		if !op.Follow {
			req.Path, req.Ino = "", node(c, false)
		}
		attr(c, pb.Method_SETATTR, req)
	case model.KSetXattr:
		i, p := xattrNode()
		do(c, pb.Method_SETXATTR, &pb.XattrRequest{Ino: i, Path: p, Name: op.Name, Value: op.Value, Flags: op.Flags}, nil)
	case model.KGetXattr:
		i, p := xattrNode()
		getxattr(c, &pb.XattrRequest{Ino: i, Path: p, Name: op.Name})
	case model.KListXattr:
		listxattr(c, &pb.NodeRequest{Path: op.Path, Nofollow: !op.Follow})
	case model.KRemoveXattr:
		i, p := xattrNode()
		do(c, pb.Method_REMOVEXATTR, &pb.XattrRequest{Ino: i, Path: p, Name: op.Name}, nil)
	case model.KLookup:
		if d := node(model.CredRoot, true); d != 0 {
			attr(c, pb.Method_LOOKUP, &pb.EntryRequest{Parent: d, Name: op.Name})
		}
	case model.KResolve:
		attr(c, pb.Method_RESOLVE, &pb.NodeRequest{Path: op.Path, Nofollow: !op.Follow})
	case model.KReaddir:
		if d := node(model.CredRoot, true); d != 0 {
			readdir(c, d)
		}
	case model.KSummary:
		if d := node(model.CredRoot, true); d != 0 {
			summary(c, d)
		}
	case model.KStatfs:
		var reply pb.StatfsReply
		if do(c, pb.Method_STATFS, &pb.NodeRequest{}, &reply) {
			r.Text = fmt.Sprintf("used=%d inodes=%d bsize=%d namemax=%d", reply.UsedBytes, reply.UsedInodes, reply.BlockSize, reply.MaxName)
		}
	case model.KReadlink:
		if n := node(c, false); n != 0 {
			readlink(n)
		}
	case model.KGetAttrIno:
		attr(c, pb.Method_GETATTR, &pb.NodeRequest{Ino: ino})
	case model.KLookupIno:
		attr(c, pb.Method_LOOKUP, &pb.EntryRequest{Parent: ino, Name: op.Name})
	case model.KMkdirIno:
		attr(c, pb.Method_MKDIR, &pb.CreateRequest{Parent: ino, Name: op.Name, Mode: op.Mode})
	case model.KMknodIno:
		attr(c, pb.Method_MKNOD, &pb.CreateRequest{Parent: ino, Name: op.Name, Mode: op.Mode, Rdev: op.Rdev})
	case model.KSymlinkIno:
		attr(c, pb.Method_SYMLINK, &pb.CreateRequest{Parent: ino, Name: op.Name, Target: op.Target})
	case model.KLinkIno:
		attr(c, pb.Method_LINK, &pb.LinkRequest{Ino: ino2, NewParent: ino, NewName: op.Name})
	case model.KUnlinkIno:
		do(c, pb.Method_UNLINK, &pb.EntryRequest{Parent: ino, Name: op.Name}, nil)
	case model.KRmdirIno:
		do(c, pb.Method_RMDIR, &pb.EntryRequest{Parent: ino, Name: op.Name}, nil)
	case model.KRenameIno:
		do(c, pb.Method_RENAME, &pb.RenameRequest{Parent: ino, Name: op.Name, NewParent: ino2, NewName: op.Name2, Flags: op.Flags}, nil)
	case model.KReadlinkIno:
		readlink(ino)
	case model.KSetAttrIno:
		s := op.Set
		attr(c, pb.Method_SETATTR, &pb.SetattrRequest{Ino: ino, Valid: s.Valid, Mode: s.Mode, Uid: s.UID, Gid: s.GID, Size: s.Size, AtimeNs: s.Atime, MtimeNs: s.Mtime})
	case model.KListXattrIno:
		listxattr(c, &pb.NodeRequest{Ino: ino})
	case model.KGetXattrIno:
		getxattr(c, &pb.XattrRequest{Ino: ino, Name: op.Name})
	case model.KSummaryIno:
		summary(c, ino)
	case model.KReaddirIno:
		readdir(c, ino)
	case model.KRemoveXattrIno:
		do(c, pb.Method_REMOVEXATTR, &pb.XattrRequest{Ino: ino, Name: op.Name}, nil)
	default:
		return model.Result{}, fmt.Errorf("unknown op %q", op.Kind)
	}
	if err != nil {
		return model.Result{}, err
	}
	if en != 0 {
		return model.Result{Err: en}, nil
	}
	return r, nil
}
