package server

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/mount"
)

// FuzzApply feeds arbitrary method numbers, payloads and identities
// through the server's decode and apply path, as a call from the network
// would arrive: nothing may panic, and the namespace's invariants hold
// after every call.
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
	seed(pb.Method_TABLES_GET, &pb.TablesRequest{Ino: 1, KnownVersion: 0, WaitMs: 10})
	seed(pb.Method_TABLES_UPDATE, &pb.TablesUpdate{
		ExpectedVersion: 0, RemoveMounts: []string{"/x"},
		SetMounts: []*pb.MountEntry{{Prefix: "/a/../b", Vpart: 4095, Target: "//t/"}, {Prefix: "/c", Vpart: 70000}},
		SetRoutes: []*pb.Route{{Vpart: 1, Addrs: []string{"h:1", "h:1"}}, {Vpart: 2}},
	})
	f.Add(uint16(9999), []byte{0xff, 0x01}, uint32(1000))

	f.Fuzz(func(t *testing.T, method uint16, payload []byte, uid uint32) {
		e := engine.New(0, 1)
		root := engine.Root
		if _, err := e.Mkdir(root, e.Root(), "a", 0o755, 2); err != nil {
			t.Fatal(err)
		}
		a, _ := e.Lookup(root, e.Root(), "a")
		if _, err := e.Mknod(root, a.Ino, "f", 0o100644, 0, 3); err != nil {
			t.Fatal(err)
		}
		m := pb.Method(method)
		req := newRequest(m)
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
