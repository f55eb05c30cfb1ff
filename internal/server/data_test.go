package server

import (
	"context"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/layout"
	"github.com/canopyfs/canopy/internal/rpc"
)

// rawClient calls a server with raw protobuf messages.
type rawClient struct {
	t testing.TB
	c *rpc.Client
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, err := rpc.Dial(addr, rpc.ClientConfig{CallTimeout: 10 * time.Second, OpTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, c: c}
}

// call sends req and decodes the reply into reply (if not nil); it returns
// the reply status as an errno (0 for success).
func (r *rawClient) call(m pb.Method, req, reply proto.Message) syscall.Errno {
	r.t.Helper()
	data, err := proto.Marshal(req)
	if err != nil {
		r.t.Fatal(err)
	}
	st, rep, err := r.c.Call(context.Background(), uint16(m), rpc.Cred{}, data)
	if err != nil {
		r.t.Fatalf("%s: %v", m, err)
	}
	if st == 0 && reply != nil {
		if err := proto.Unmarshal(rep, reply); err != nil {
			r.t.Fatalf("%s reply: %v", m, err)
		}
	}
	return syscall.Errno(st)
}

// must is call that fails the test unless the call succeeds.
func (r *rawClient) must(m pb.Method, req, reply proto.Message) {
	r.t.Helper()
	if errno := r.call(m, req, reply); errno != 0 {
		r.t.Fatalf("%s %v: %v", m, req, errno)
	}
}

// create makes a regular file at path and returns its inode number.
func (r *rawClient) create(path string) uint64 {
	r.t.Helper()
	var a pb.AttrReply
	r.must(pb.Method_MKNOD, &pb.CreateRequest{Path: path, Mode: engine.S_IFREG | 0o644}, &a)
	return a.Attr.Ino
}

// write allocates one slice id and commits it at file offset off with n
// bytes, returning the id.
func (r *rawClient) write(ino uint64, off uint64, n uint32) uint64 {
	r.t.Helper()
	var al pb.AllocSlicesReply
	r.must(pb.Method_ALLOC_SLICES, &pb.AllocSlicesRequest{Ino: ino, Count: 1}, &al)
	r.must(pb.Method_COMMIT, &pb.CommitRequest{Ino: ino, Writes: []*pb.SliceWrite{{
		Chunk: uint32(off / layout.ChunkSize),
		Slice: &pb.Slice{Id: al.First, Size: n, Len: n, Pos: uint32(off % layout.ChunkSize)},
	}}}, nil)
	return al.First
}

func (r *rawClient) garbage() map[uint64]bool {
	r.t.Helper()
	var g pb.ListSlicesReply
	r.must(pb.Method_LIST_GARBAGE, &pb.ListSlicesRequest{Ino: 1, Limit: engine.MaxListSlices}, &g)
	ids := map[uint64]bool{}
	for _, s := range g.Slices {
		ids[s.Id] = true
	}
	return ids
}

func TestDataPathOverRPC(t *testing.T) {
	_, addr := openAndServe(t, Config{Dir: t.TempDir(), Storage: "file:///tmp/objects", Logger: slog.New(slog.DiscardHandler)})
	c := dialRaw(t, addr)
	var vol pb.VolumeReply
	c.must(pb.Method_VOLUME, &pb.NodeRequest{Ino: 1}, &vol)
	if vol.Storage != "file:///tmp/objects" || vol.ChunkSize != layout.ChunkSize || vol.BlockSize != layout.BlockSize {
		t.Fatalf("volume %v", &vol)
	}
	ino := c.create("/f")
	first := c.write(ino, 0, 1000)
	second := c.write(ino, 0, 1000) // covers the first entirely
	var rc pb.ReadChunksReply
	c.must(pb.Method_READ_CHUNKS, &pb.ReadChunksRequest{Ino: ino}, &rc)
	if rc.Attr.Size != 1000 || len(rc.Chunks) != 1 || len(rc.Chunks[0].Slices) != 1 || rc.Chunks[0].Slices[0].Id != second {
		t.Fatalf("read chunks: %v", &rc)
	}
	if g := c.garbage(); !g[first] || g[second] {
		t.Fatalf("garbage %v: want %d and not %d", g, first, second)
	}
	// Unknown ids and ids in use are ignored by PURGE.
	c.must(pb.Method_PURGE, &pb.PurgeRequest{Ino: 1, Ids: []uint64{first, second, 1 << 40}}, nil)
	if g := c.garbage(); len(g) != 0 {
		t.Fatalf("garbage after purge: %v", g)
	}
	var ls pb.ListSlicesReply
	c.must(pb.Method_LIST_SLICES, &pb.ListSlicesRequest{Ino: 1}, &ls)
	if len(ls.Slices) != 1 || ls.Slices[0].Id != second || ls.Slices[0].Size != 1000 || !ls.Eof || ls.NextId <= second {
		t.Fatalf("list slices: %v", &ls)
	}
	// Reusing a committed id is refused.
	if errno := c.call(pb.Method_COMMIT, &pb.CommitRequest{Ino: ino, Writes: []*pb.SliceWrite{{
		Slice: &pb.Slice{Id: second, Size: 10, Len: 10}}}}, nil); errno != syscall.EINVAL {
		t.Fatalf("commit of a used id: %v, want EINVAL", errno)
	}
}
