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

// A file deleted while open keeps its slices out of the garbage, and stays
// readable by inode, until the client that opened it closes it, or until
// that client's connections are all gone.
func TestDeletedWhileOpen(t *testing.T) {
	for _, how := range []string{"close", "disconnect", "restart"} {
		t.Run(how, func(t *testing.T) {
			cfg := Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
			srv, addr := openAndServe(t, cfg)
			a, b := dialRaw(t, addr), dialRaw(t, addr)
			ino := a.create("/f")
			id := a.write(ino, 0, 100)
			a.must(pb.Method_OPEN, &pb.OpenRequest{Path: "/f", Flags: uint32(syscall.O_RDONLY)}, nil)
			b.must(pb.Method_UNLINK, &pb.EntryRequest{Path: "/f"}, nil)
			if errno := b.call(pb.Method_LOOKUP, &pb.EntryRequest{Path: "/f"}, nil); errno != syscall.ENOENT {
				t.Fatalf("lookup of the deleted file: %v", errno)
			}
			var rc pb.ReadChunksReply
			b.must(pb.Method_READ_CHUNKS, &pb.ReadChunksRequest{Ino: ino}, &rc)
			if rc.Attr.Nlink != 0 || rc.Chunks[0].Slices[0].Id != id {
				t.Fatalf("deleted open file: %v", &rc)
			}
			if g := b.garbage(); len(g) != 0 {
				t.Fatalf("garbage %v while the file is open", g)
			}
			// Only the client that opened it can close it.
			if errno := b.call(pb.Method_CLOSE, &pb.NodeRequest{Ino: ino}, nil); errno != syscall.EBADF {
				t.Fatalf("close by another client: %v, want EBADF", errno)
			}
			switch how {
			case "close":
				a.must(pb.Method_CLOSE, &pb.NodeRequest{Ino: ino}, nil)
			case "disconnect":
				a.c.Close()
			case "restart":
				srv.Close()
				srv, addr = openAndServe(t, cfg)
				b = dialRaw(t, addr)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !b.garbage()[id] {
				if time.Now().After(deadline) {
					t.Fatalf("slice %d not garbage 10s after %s", id, how)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if errno := b.call(pb.Method_GETATTR, &pb.NodeRequest{Ino: ino}, nil); errno != syscall.ENOENT {
				t.Fatalf("getattr after %s: %v, want ENOENT", how, errno)
			}
		})
	}
}

// Opens are checked like open(2) and not logged.
func TestOpenChecksAccess(t *testing.T) {
	srv, addr := openAndServe(t, Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	c := dialRaw(t, addr)
	c.must(pb.Method_MKNOD, &pb.CreateRequest{Path: "/ro", Mode: engine.S_IFREG | 0o444}, nil)
	records := srv.Stats().Records
	other, err := rpc.Dial(addr, rpc.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	req, _ := proto.Marshal(&pb.OpenRequest{Path: "/ro", Flags: uint32(syscall.O_WRONLY)})
	if st, _, err := other.Call(context.Background(), uint16(pb.Method_OPEN), rpc.Cred{UID: 7, GID: 7}, req); err != nil || syscall.Errno(st) != syscall.EACCES {
		t.Fatalf("open for writing without permission: %d %v", st, err)
	}
	req, _ = proto.Marshal(&pb.OpenRequest{Path: "/ro"})
	if st, _, err := other.Call(context.Background(), uint16(pb.Method_OPEN), rpc.Cred{UID: 7, GID: 7}, req); err != nil || st != 0 {
		t.Fatalf("open for reading: %d %v", st, err)
	}
	if got := srv.Stats().Records; got != records {
		t.Fatalf("opens wrote %d log records", got-records)
	}
}
