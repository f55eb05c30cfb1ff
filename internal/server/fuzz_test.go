package server

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/mount"
	"github.com/canopyfs/canopy/internal/protocol"
)

// FuzzApply feeds arbitrary method numbers, payloads and identities
// through the server's decode and apply path, as a call from the network
// would arrive: nothing may panic, and the namespace's invariants hold
// after every call. The data path's calls find slice ids allocated, a
// file holding one slice, and an open file whose last link is gone.
func FuzzApply(f *testing.F) {
	seed := func(m pb.Method, msg proto.Message) {
		data, _ := proto.Marshal(msg)
		f.Add(uint16(m), data, uint32(0))
	}
	seed(pb.Method_MKDIR, &pb.CreateRequest{Path: "/d", Mode: 0o755})
	seed(pb.Method_MKNOD, &pb.CreateRequest{Parent: 1, Name: "f", Mode: 0o100644})
	seed(pb.Method_SYMLINK, &pb.CreateRequest{Path: "/s", Target: "/s"})
	seed(pb.Method_RENAME, &pb.RenameRequest{Path: "/a", NewPath: "/a/b", Flags: 2})
	seed(pb.Method_LINK, &pb.LinkRequest{Path: "/a/f", NewParent: 1, NewName: "g"})
	seed(pb.Method_READDIR, &pb.ReaddirRequest{Ino: 1, Limit: 1 << 31, Attrs: true})
	seed(pb.Method_SETATTR, &pb.SetattrRequest{Path: "/a/f", Valid: 0xff, Size: 1 << 62})
	seed(pb.Method_SETXATTR, &pb.XattrRequest{Path: "/a", Name: "user.x", Value: []byte("v")})
	seed(pb.Method_SUMMARY, &pb.NodeRequest{Path: "/"})
	seed(pb.Method_SNAPSHOT_CREATE, &pb.SnapshotRequest{Path: "/", Name: "s"})
	seed(pb.Method_SNAPSHOT_REMOVE, &pb.SnapshotRequest{Ino: 1, Name: "s"})
	seed(pb.Method_SNAPSHOT_LIST, &pb.NodeRequest{Path: "/a"})
	seed(pb.Method_SNAPSHOT_DIFF, &pb.SnapshotDiffRequest{Path: "/", Name: "s", Name2: "s"})
	seed(pb.Method_CLONE, &pb.CloneRequest{Path: "/a", NewPath: "/a/b"})
	seed(pb.Method_TABLES_GET, &pb.TablesRequest{Ino: 1, KnownVersion: 0, WaitMs: 10})
	seed(pb.Method_TABLES_UPDATE, &pb.TablesUpdate{
		ExpectedVersion: 0, RemoveMounts: []string{"/x"},
		SetMounts: []*pb.MountEntry{{Prefix: "/a/../b", Vpart: 4095, Target: "//t/"}, {Prefix: "/c", Vpart: 70000}},
		SetRoutes: []*pb.Route{{Vpart: 1, Addrs: []string{"h:1", "h:1"}}, {Vpart: 2}},
	})
	seed(pb.Method_ALLOC_SLICES, &pb.AllocSlicesRequest{Ino: 1, Count: 1 << 31})
	seed(pb.Method_COMMIT, &pb.CommitRequest{Ino: 3, Size: 1 << 40, Writes: []*pb.SliceWrite{
		{Chunk: 0, Slice: &pb.Slice{Id: 2, Size: 100, Off: 50, Len: 50, Pos: 1<<26 - 50}},
		{Chunk: 1, Slice: &pb.Slice{Id: 2, Size: 100, Off: 0, Len: 50}},
		{Chunk: 1<<32 - 1, Slice: &pb.Slice{Id: 3, Size: 1, Len: 1}},
	}})
	seed(pb.Method_READ_CHUNKS, &pb.ReadChunksRequest{Ino: 3, Chunk: 1<<32 - 2, Count: 1 << 31})
	seed(pb.Method_COMPACT, &pb.CompactRequest{Ino: 3, OldIds: []uint64{1}, Slice: &pb.Slice{Id: 4, Size: 1 << 20, Len: 1 << 20}})
	seed(pb.Method_OPEN, &pb.OpenRequest{Path: "/a/f", Flags: 0o1002})
	seed(pb.Method_CLOSE, &pb.NodeRequest{Ino: 3})
	seed(pb.Method_LIST_GARBAGE, &pb.ListSlicesRequest{Ino: 1, Limit: 1 << 31, FreedBeforeNs: -1})
	seed(pb.Method_LIST_SLICES, &pb.ListSlicesRequest{Ino: 1, After: 1 << 63})
	seed(pb.Method_PURGE, &pb.PurgeRequest{Ino: 1, Ids: []uint64{0, 1, 1 << 63}})
	seed(pb.Method_SETATTR, &pb.SetattrRequest{Ino: 3, Valid: 8, Size: 10})
	seed(pb.Method_LINK, &pb.LinkRequest{Ino: 4, NewParent: 1, NewName: "back"})
	seed(pb.Method_CLOSE, &pb.NodeRequest{Ino: 4})
	xid := make([]byte, engine.XIDLen)
	seed(pb.Method_XRENAME_PREPARE_SRC, &pb.XPrepareRequest{Path: "/a", Id: xid, Peer: 2, Busy: []string{"/a/f", "/nowhere", ""}})
	seed(pb.Method_XRENAME_PREPARE_DST, &pb.XPrepareRequest{Parent: 1, Name: "a", Id: xid, Peer: 2, Flags: 2, SourceDir: true, Nodes: 3, Bytes: 1 << 40})
	tree := &pb.XNode{Mode: 0o40755, Entries: []*pb.XEntry{
		{Name: "f", Node: &pb.XNode{Mode: 0o100644, Size: 10, Chunks: []*pb.XChunk{{Slices: []*pb.XSlice{{Id: 1<<48 + 1, Size: 10, Len: 10}}}}}},
		{Name: "d", Node: &pb.XNode{Mode: 0o40700, Entries: []*pb.XEntry{{Name: "..", Node: nil}}}},
	}}
	seed(pb.Method_XRENAME_COMMIT_DST, &pb.XIntentRequest{Ino: 1, Id: xid, Image: tree})
	seed(pb.Method_XRENAME_COMMIT_SRC, &pb.XIntentRequest{Ino: 1, Id: xid, Image: tree, Busy: []string{"/a"}})
	f.Add(uint16(9999), []byte{0xff, 0x01}, uint32(1000))

	f.Fuzz(func(t *testing.T, method uint16, payload []byte, uid uint32) {
		e := engine.New(0, 1)
		root := engine.Root
		if _, err := e.Mkdir(root, e.Root(), "a", 0o755, 2); err != nil {
			t.Fatal(err)
		}
		a, _ := e.Lookup(root, e.Root(), "a")
		f, err := e.Mknod(root, a.Ino, "f", 0o100644, 0, 3)
		if err != nil {
			t.Fatal(err)
		}
		// Slice ids 1-8 are allocated; /a/f (inode 3) holds slice 1.
		if _, _, err := e.AllocSlices(e.Root(), 8); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Commit(root, f.Ino, []engine.SliceWrite{{Slice: engine.Slice{ID: 1, Size: 100, Len: 100}}}, 0, 0, 4); err != nil {
			t.Fatal(err)
		}
		// /a/g (inode 4) holds slice 8, is open and unlinked: an orphan.
		g, err := e.Mknod(root, a.Ino, "g", 0o100644, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Commit(root, g.Ino, []engine.SliceWrite{{Slice: engine.Slice{ID: 8, Size: 10, Len: 10}}}, 0, 0, 6); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Open(root, g.Ino, 0); err != nil {
			t.Fatal(err)
		}
		if err := e.Unlink(root, a.Ino, "g", 7); err != nil {
			t.Fatal(err)
		}
		m := pb.Method(method)
		req := protocol.NewRequest(m)
		if req == nil || proto.Unmarshal(payload, req) != nil {
			return
		}
		apply(e, engine.Cred{UID: uid, GID: uid}, m, req, 10)
		if err := e.Check(); err != nil {
			t.Fatalf("%s %x: %v", m, payload, err)
		}
		tb, err := e.Tables()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mount.Compile(tb.Mounts); err != nil {
			t.Fatalf("%s %x: mount table no longer compiles: %v", m, payload, err)
		}
		if _, err := mount.CompileRouting(tb.Routes); err != nil {
			t.Fatalf("%s %x: routing table no longer compiles: %v", m, payload, err)
		}
	})
}
