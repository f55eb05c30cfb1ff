package server

import (
	"fmt"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// dispatchXRename runs the steps of a rename across partitions
// (engine/xrename.go) on this partition's side.
func dispatchXRename(e *engine.Engine, c engine.Cred, m pb.Method, req proto.Message, now int64) (proto.Message, error) {
	switch m {
	case pb.Method_XRENAME_PREPARE_SRC, pb.Method_XRENAME_PREPARE_DST:
		r := req.(*pb.XPrepareRequest)
		id, err := xid(r.Id)
		if err != nil {
			return nil, err
		}
		if r.Peer > 1<<engine.PartitionBits-1 {
			return nil, fmt.Errorf("peer %d: %w", r.Peer, syscall.EINVAL)
		}
		parent, name, err := entry(e, c, r.Parent, r.Path, r.Name)
		if err != nil {
			return nil, err
		}
		if m == pb.Method_XRENAME_PREPARE_SRC {
			busy, err := busyInos(e, r.Busy)
			if err != nil {
				return nil, err
			}
			p, err := e.XPrepareSource(c, id, parent, name, r.Flags, uint16(r.Peer), busy, now)
			if err != nil {
				return nil, err
			}
			return &pb.XPrepareReply{Ino: uint64(p.Ino), State: uint32(p.State), Dir: p.Dir, Nodes: p.Size.Nodes, Bytes: p.Size.Bytes}, nil
		}
		busy, err := busyInos(e, r.Busy)
		if err != nil {
			return nil, err
		}
		img, err := e.XPrepareTarget(c, id, parent, name, r.Flags, uint16(r.Peer), r.SourceDir,
			engine.XSize{Nodes: r.Nodes, Bytes: r.Bytes}, busy, now)
		if err != nil {
			return nil, err
		}
		return &pb.XPrepareReply{Image: imageToPB(e, img)}, nil
	}
	r := req.(*pb.XIntentRequest)
	if m == pb.Method_XRENAME_LIST {
		return intentList(e, now), nil
	}
	id, err := xid(r.Id)
	if err != nil {
		return nil, err
	}
	switch m {
	case pb.Method_XRENAME_COMMIT_SRC:
		var in *engine.XNode
		if r.Image != nil {
			in = imageFromPB(r.Image)
		}
		busy, err := busyInos(e, r.Busy)
		if err != nil {
			return nil, err
		}
		img, err := e.XCommitSource(id, in, busy, now)
		if err != nil {
			return nil, err
		}
		return &pb.XPrepareReply{Image: imageToPB(e, img)}, nil
	case pb.Method_XRENAME_COMMIT_DST:
		if r.Image == nil {
			return nil, fmt.Errorf("commit without an image: %w", syscall.EINVAL)
		}
		return nil, e.XCommitTarget(id, imageFromPB(r.Image), now)
	case pb.Method_XRENAME_ABORT:
		return nil, e.XAbort(id)
	case pb.Method_XRENAME_FORGET:
		return nil, e.XForget(id, now)
	default: // XRENAME_STATE
		return &pb.XIntentReply{State: uint32(e.IntentState(id))}, nil
	}
}

// maxBusy bounds the mount points one step names.
const maxBusy = 1 << 12

// busyInos resolves the mount points a router names in this partition
// (XPrepareRequest.busy); a path that names nothing here is left out.
func busyInos(e *engine.Engine, paths []string) ([]engine.Ino, error) {
	if len(paths) > maxBusy {
		return nil, fmt.Errorf("%d mount points named: %w", len(paths), syscall.EINVAL)
	}
	var out []engine.Ino
	for _, p := range paths {
		if ino, err := e.ResolveIno(engine.Cred{}, p, false); err == nil {
			out = append(out, ino)
		}
	}
	return out, nil
}

func xid(b []byte) (engine.XID, error) {
	var id engine.XID
	if len(b) != engine.XIDLen {
		return id, fmt.Errorf("intent id of %d bytes: %w", len(b), syscall.EINVAL)
	}
	copy(id[:], b)
	return id, nil
}

// maxListedInline bounds the inline bytes the images of one
// XRENAME_LIST carry. Intents whose images would go beyond are left for a
// later list (the recovery pass asks again; it decides to abort a target
// intent by the source's XRENAME_STATE, never by its absence here).
const maxListedInline = 8 << 20

func intentList(e *engine.Engine, now int64) *pb.XIntentListReply {
	r := &pb.XIntentListReply{}
	inline := 0
	for _, in := range e.Intents() {
		if in.State == engine.XDone {
			continue // nothing left to do; kept for retries
		}
		img := imageToPB(e, in.Image)
		if img != nil {
			n := inlineBytes(img)
			if n > 0 && inline+n > maxListedInline {
				continue
			}
			inline += n
		}
		r.Intents = append(r.Intents, &pb.XIntent{Id: in.ID[:], Role: uint32(in.Role), State: uint32(in.State), Peer: uint32(in.Peer),
			AgeNs: now - in.At, Image: img, Parent: uint64(in.Parent), Name: in.Name})
	}
	return r
}

// inlineBytes returns the inline bytes image x carries, its subtree's
// included.
func inlineBytes(x *pb.XNode) int {
	n := 0
	for _, s := range x.Inline {
		n += len(s.Data)
	}
	for _, ent := range x.Entries {
		if ent.Node != nil {
			n += inlineBytes(ent.Node)
		}
	}
	return n
}

// imageToPB encodes img with the bytes of its slices e still holds
// inline (engine/inline.go), which the partition it goes to needs.
func imageToPB(e *engine.Engine, img *engine.XNode) *pb.XNode {
	if img == nil {
		return nil
	}
	a := &img.Attr
	x := &pb.XNode{Mode: a.Mode, Uid: a.UID, Gid: a.GID, Size: a.Size, AtimeNs: a.Atime, MtimeNs: a.Mtime,
		CtimeNs: a.Ctime, Rdev: a.Rdev, Target: img.Target, Ino: uint64(a.Ino)}
	for _, xa := range img.Xattrs {
		x.Xattrs = append(x.Xattrs, &pb.XXattr{Name: xa.Name, Value: xa.Value})
	}
	for _, ch := range img.Chunks {
		c := &pb.XChunk{Index: ch.Index}
		for _, s := range ch.Slices {
			c.Slices = append(c.Slices, &pb.XSlice{Id: s.ID, Size: s.Size, Off: s.Off, Len: s.Len, Pos: s.Pos})
		}
		x.Chunks = append(x.Chunks, c)
	}
	for _, s := range e.ImageInline(img) {
		x.Inline = append(x.Inline, &pb.InlineSlice{Id: s.ID, Data: s.Data})
	}
	for _, ent := range img.Entries {
		x.Entries = append(x.Entries, &pb.XEntry{Name: ent.Name, Node: imageToPB(e, ent.Node)})
	}
	return x
}

// imageFromPB decodes image x (a nil node of an entry stays nil, for the
// engine's check to refuse).
func imageFromPB(x *pb.XNode) *engine.XNode {
	if x == nil {
		return nil
	}
	img := &engine.XNode{Attr: engine.Attr{Ino: engine.Ino(x.Ino), Mode: x.Mode, UID: x.Uid, GID: x.Gid, Size: x.Size,
		Atime: x.AtimeNs, Mtime: x.MtimeNs, Ctime: x.CtimeNs, Rdev: x.Rdev}, Target: x.Target}
	for _, xa := range x.Xattrs {
		img.Xattrs = append(img.Xattrs, engine.XXattr{Name: xa.Name, Value: xa.Value})
	}
	for _, c := range x.Chunks {
		ch := engine.XChunk{Index: c.Index}
		for _, s := range c.Slices {
			ch.Slices = append(ch.Slices, engine.Slice{ID: s.Id, Size: s.Size, Off: s.Off, Len: s.Len, Pos: s.Pos})
		}
		img.Chunks = append(img.Chunks, ch)
	}
	for _, s := range x.Inline {
		if s != nil {
			img.Inline = append(img.Inline, engine.InlineSlice{ID: s.Id, Data: s.Data})
		}
	}
	for _, ent := range x.Entries {
		if ent != nil {
			img.Entries = append(img.Entries, engine.XEntry{Name: ent.Name, Node: imageFromPB(ent.Node)})
		}
	}
	return img
}
