package server

import (
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/layout"
)

// dispatchData applies the data path's calls (see docs/data.md). VOLUME
// is answered by the RPC reader (volumeReply) and never gets here; OPEN
// and CLOSE get here through the apply loop's session bookkeeping
// (state.go).
func dispatchData(e *engine.Engine, c engine.Cred, m pb.Method, req proto.Message, now int64) (proto.Message, error) {
	switch m {
	case pb.Method_ALLOC_SLICES:
		r := req.(*pb.AllocSlicesRequest)
		first, n, err := e.AllocSlices(engine.Ino(r.Ino), r.Count)
		if err != nil {
			return nil, err
		}
		return &pb.AllocSlicesReply{First: first, Count: n}, nil
	case pb.Method_COMMIT, pb.Method_COMMIT_SETATTR:
		r := req.(*pb.CommitRequest)
		writes := make([]engine.SliceWrite, len(r.Writes))
		for i, w := range r.Writes {
			if w.Slice == nil {
				return nil, syscall.EINVAL
			}
			writes[i] = engine.SliceWrite{Chunk: w.Chunk, Slice: fromPBSlice(w.Slice), Data: w.Data}
		}
		if m == pb.Method_COMMIT {
			return attrReply(e.Commit(c, engine.Ino(r.Ino), writes, r.Size, r.MtimeNs, now))
		}
		if r.Attrs == nil {
			return nil, syscall.EINVAL
		}
		return attrReply(e.CommitSetAttr(c, engine.Ino(r.Ino), writes, r.Size, r.MtimeNs, setAttrOf(r.Attrs), now))
	case pb.Method_CONCAT:
		r := req.(*pb.ConcatRequest)
		srcs := make([]engine.Ino, len(r.Sources))
		for i, s := range r.Sources {
			srcs[i] = engine.Ino(s)
		}
		return attrReply(e.Concat(c, engine.Ino(r.Ino), srcs, now))
	case pb.Method_READ_CHUNKS:
		r := req.(*pb.ReadChunksRequest)
		a, views, err := e.ReadChunks(engine.Ino(r.Ino), r.Chunk, r.Count)
		if err != nil {
			return nil, err
		}
		reply := &pb.ReadChunksReply{Attr: toPB(&a), Chunks: make([]*pb.ChunkView, len(views))}
		for i, v := range views {
			cv := &pb.ChunkView{Chunk: v.Chunk, StoredSlices: uint32(v.Stored), Slices: make([]*pb.Slice, len(v.Slices))}
			for k := range v.Slices {
				cv.Slices[k] = toPBSlice(&v.Slices[k])
			}
			reply.Chunks[i] = cv
		}
		reply.Inline = inlineOfViews(e, views)
		return reply, nil
	case pb.Method_OPEN:
		r := req.(*pb.OpenRequest)
		ino, err := node(e, c, r.Ino, r.Path, true)
		if err != nil {
			return nil, err
		}
		return attrReply(e.Open(c, ino, r.Flags))
	case pb.Method_CLOSE:
		r := req.(*pb.NodeRequest)
		return nil, e.Close(engine.Ino(r.Ino), now)
	case pb.Method_COMPACT:
		r := req.(*pb.CompactRequest)
		if r.Slice == nil {
			return nil, syscall.EINVAL
		}
		return nil, e.Compact(engine.Ino(r.Ino), r.Chunk, r.OldIds, fromPBSlice(r.Slice), now)
	case pb.Method_LIST_GARBAGE:
		r := req.(*pb.ListSlicesRequest)
		if _, err := e.GetAttr(engine.Ino(r.Ino)); err != nil {
			return nil, err
		}
		refs, eof := e.ListGarbage(r.After, int(min(r.Limit, engine.MaxListSlices)), r.FreedBeforeNs)
		return listSlicesReply(e, refs, eof), nil
	case pb.Method_PURGE:
		r := req.(*pb.PurgeRequest)
		if _, err := e.GetAttr(engine.Ino(r.Ino)); err != nil {
			return nil, err
		}
		e.Purge(r.Ids)
		return nil, nil
	case pb.Method_LIST_INLINE:
		r := req.(*pb.ListSlicesRequest)
		if _, err := e.GetAttr(engine.Ino(r.Ino)); err != nil {
			return nil, err
		}
		list, eof := e.ListInline(r.After, int(min(r.Limit, engine.MaxListSlices)))
		reply := &pb.ListInlineReply{Slices: make([]*pb.InlineSlice, len(list)), Eof: eof}
		for i, s := range list {
			reply.Slices[i] = &pb.InlineSlice{Id: s.ID, Data: s.Data}
		}
		return reply, nil
	case pb.Method_INLINE_STORED:
		r := req.(*pb.PurgeRequest)
		if _, err := e.GetAttr(engine.Ino(r.Ino)); err != nil {
			return nil, err
		}
		e.InlineStored(r.Ids)
		return nil, nil
	case pb.Method_LIST_SLICES:
		r := req.(*pb.ListSlicesRequest)
		if _, err := e.GetAttr(engine.Ino(r.Ino)); err != nil {
			return nil, err
		}
		refs, eof := e.ListSlices(r.After, int(min(r.Limit, engine.MaxListSlices)))
		return listSlicesReply(e, refs, eof), nil
	}
	return nil, syscall.ENOSYS
}

// volumeReply answers VOLUME: where file data is stored and how it is cut.
func volumeReply(storage string) *pb.VolumeReply {
	return &pb.VolumeReply{Storage: storage, ChunkSize: layout.ChunkSize, BlockSize: layout.BlockSize, InlineMax: engine.MaxInlineSlice}
}

// inlineOfViews returns the bytes of the inline slices views name.
// (A file's slices hold at most engine.MaxFileInlineBytes inline.)
func inlineOfViews(e *engine.Engine, views []engine.ChunkView) []*pb.InlineSlice {
	if bytes, _ := e.InlineBytes(); bytes == 0 {
		return nil // the common case: nothing to look up per slice
	}
	var out []*pb.InlineSlice
	var seen map[uint64]bool
	for _, v := range views {
		for _, s := range v.Slices {
			d, ok := e.Inline(s.ID)
			if !ok || seen[s.ID] {
				continue
			}
			if seen == nil {
				seen = map[uint64]bool{}
			}
			seen[s.ID] = true
			out = append(out, &pb.InlineSlice{Id: s.ID, Data: d})
		}
	}
	return out
}

func listSlicesReply(e *engine.Engine, refs []engine.SliceRef, eof bool) *pb.ListSlicesReply {
	r := &pb.ListSlicesReply{Slices: make([]*pb.SliceRef, len(refs)), Eof: eof, NextId: e.NextSliceID()}
	for i, s := range refs {
		r.Slices[i] = &pb.SliceRef{Id: s.ID, Size: s.Size, FreedNs: s.Freed, Inline: s.Inline}
	}
	return r
}

func fromPBSlice(s *pb.Slice) engine.Slice {
	return engine.Slice{ID: s.Id, Size: s.Size, Off: s.Off, Len: s.Len, Pos: s.Pos}
}

func toPBSlice(s *engine.Slice) *pb.Slice {
	return &pb.Slice{Id: s.ID, Size: s.Size, Off: s.Off, Len: s.Len, Pos: s.Pos}
}
