package router

import (
	"errors"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/protocol"
)

// FuzzFields feeds any bytes to the routing-field reader and, when they
// read, rewrites their paths: nothing panics, the rewritten request reads
// back with the new paths and the same inodes, and a request that decodes
// as a RenameRequest still does, with only its paths changed.
func FuzzFields(f *testing.F) {
	seed := func(m proto.Message) []byte { b, _ := proto.Marshal(m); return b }
	f.Add(seed(&pb.RenameRequest{Parent: 1, Path: "/a/b", Name: "n", NewParent: protocol.MakeIno(2, 0), NewPath: "/c", NewName: "m", Flags: 1}), "/x", "/y/z")
	f.Add(seed(&pb.NodeRequest{Ino: protocol.MakeIno(1, 7), Nofollow: true}), "", "")
	f.Add(seed(&pb.ReaddirRequest{Path: "/d", Cursor: "c", Limit: 3, Attrs: true}), "/inside/d", "")
	f.Add(seed(&pb.OpenRequest{Path: "/f", Flags: 2}), "/g", "")
	f.Add(seed(&pb.CreateRequest{Path: "/p", Mode: 0o644, Target: "t"}), "/q", "/r")
	f.Add([]byte{0x12, 0xff}, "/a", "")           // length past the end
	f.Add([]byte{0x0a, 0x01, 'x'}, "/a", "")      // field 1 as bytes
	f.Add([]byte{0x08, 0x80, 0x80, 0x80}, "", "") // truncated varint
	f.Add([]byte{0x12, 0x01, '/', 0x12, 0x02, '/', 'a'}, "/b", "")
	f.Fuzz(func(t *testing.T, req []byte, path, newPath string) {
		fs, err := readFields(req)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v is not errMalformed", err)
			}
			return
		}
		out := rewrite(nil, req, &fs, path, newPath)
		again, err := readFields(out)
		if err != nil {
			t.Fatalf("rewritten request %x does not read: %v", out, err)
		}
		wantPath, wantNew := path, newPath
		if path == "" && fs.pathAt.end == 0 {
			wantPath = ""
		}
		if again.path != wantPath || again.newPath != wantNew {
			t.Fatalf("rewritten with %q, %q; reads %q, %q", path, newPath, again.path, again.newPath)
		}
		if again.ino != fs.ino || again.newParent != fs.newParent || again.seven != fs.seven || again.sevenStr != fs.sevenStr {
			t.Fatalf("rewrite changed other fields: %+v, then %+v", fs, again)
		}
		var before, after pb.RenameRequest
		// The fuzzer's paths may not be UTF-8, which the partition reports
		// when it decodes them; the router passes them on as bytes.
		if proto.Unmarshal(req, &before) != nil || !utf8.ValidString(path) || !utf8.ValidString(newPath) {
			return
		}
		if err := proto.Unmarshal(out, &after); err != nil {
			t.Fatalf("a RenameRequest no longer decodes after the rewrite: %v", err)
		}
		before.Path, before.NewPath = path, newPath
		if !proto.Equal(&before, &after) {
			t.Fatalf("rewrite changed more than the paths: %v, then %v", &before, &after)
		}
	})
}
