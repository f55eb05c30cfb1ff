package protocol

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/mount"
)

func TestInoLayout(t *testing.T) {
	for _, c := range []struct {
		p     uint16
		local uint64
	}{{0, 1}, {1, 1}, {7, 12345}, {0xffff, MaxLocal}} {
		ino := MakeIno(c.p, c.local)
		if PartitionOf(ino) != c.p || LocalOf(ino) != c.local {
			t.Errorf("MakeIno(%d, %d) = %#x: partition %d local %d", c.p, c.local, ino, PartitionOf(ino), LocalOf(ino))
		}
	}
	if RootIno(0) != 1 {
		t.Errorf("RootIno(0) = %d, want 1 (the namespace's root)", RootIno(0))
	}
	if got := RootIno(3); got != 3<<48|1 || !IsRoot(got) || PartitionOf(got) != 3 {
		t.Errorf("RootIno(3) = %#x", got)
	}
	if IsRoot(MakeIno(3, 2)) {
		t.Error("local number 2 taken for a root")
	}
}

// Every method the .proto defines has an entry, and its class agrees with
// what its comment in api/meta.proto says of it.
func TestEveryMethodHasAClass(t *testing.T) {
	for num, name := range pb.Method_name {
		m := pb.Method(num)
		info := Lookup(m)
		if m == pb.Method_METHOD_UNSPECIFIED {
			if info.Class != ClassUnknown {
				t.Errorf("METHOD_UNSPECIFIED has class %v", info.Class)
			}
			continue
		}
		if info.Class == ClassUnknown || info.Route == RouteNone {
			t.Errorf("method %s (%d) missing from the method table", name, num)
		}
		if req := NewRequest(m); req == nil {
			t.Errorf("method %s has no request type", name)
		} else if a, b := NewRequest(m), NewRequest(m); a == b {
			t.Errorf("method %s: NewRequest returns one message twice", name)
		}
		desc := string(m.Descriptor().Values().ByNumber(m.Number()).Name())
		if desc != name {
			t.Errorf("method %d named %q in the descriptor, %q in the map", num, desc, name)
		}
	}
	for _, m := range []pb.Method{pb.Method_METHOD_UNSPECIFIED, 36, 39, 42, 1000, -1} {
		if Known(m) || NewRequest(m) != nil {
			t.Errorf("method %d known", m)
		}
	}
}

func TestMutationsAreWhatTheProtoSays(t *testing.T) {
	want := map[pb.Method]bool{
		pb.Method_SETATTR: true, pb.Method_MKDIR: true, pb.Method_MKNOD: true, pb.Method_UNLINK: true,
		pb.Method_RMDIR: true, pb.Method_RENAME: true, pb.Method_LINK: true, pb.Method_SYMLINK: true,
		pb.Method_SETXATTR: true, pb.Method_REMOVEXATTR: true, pb.Method_ALLOC_SLICES: true,
		pb.Method_COMMIT: true, pb.Method_COMPACT: true, pb.Method_PURGE: true, pb.Method_TABLES_UPDATE: true,
		pb.Method_AUTH_ADD: true, pb.Method_AUTH_REMOVE: true, pb.Method_AUTH_ROTATE: true,
		pb.Method_CONCAT: true, pb.Method_QUOTA_SET: true, pb.Method_QUOTA_REMOVE: true, pb.Method_QUOTA_REPAIR: true,
		pb.Method_AUTH_SYNC:       true,
		pb.Method_OWNER_QUOTA_SET: true, pb.Method_OWNER_QUOTA_REMOVE: true, pb.Method_OWNER_QUOTA_REPAIR: true, pb.Method_OWNER_QUOTA_ADJUST: true,
		pb.Method_TRASH_RESTORE: true, pb.Method_TRASH_PURGE: true,
		pb.Method_XRENAME_PREPARE_SRC: true, pb.Method_XRENAME_PREPARE_DST: true,
		pb.Method_XRENAME_COMMIT_SRC: true, pb.Method_XRENAME_COMMIT_DST: true,
		pb.Method_XRENAME_ABORT: true, pb.Method_XRENAME_FORGET: true,
		pb.Method_SNAPSHOT_CREATE: true, pb.Method_SNAPSHOT_REMOVE: true, pb.Method_CLONE: true,
		pb.Method_INLINE_STORED: true, pb.Method_COMMIT_SETATTR: true,
	}
	for num := range pb.Method_name {
		m := pb.Method(num)
		if IsMutation(m) != want[m] {
			t.Errorf("IsMutation(%s) = %v, want %v", m, IsMutation(m), want[m])
		}
	}
}

func TestMountEntryRoundTrip(t *testing.T) {
	e := mount.Entry{Prefix: "/a/b", VPart: 4095, Target: "/x", ReadOnly: true}
	got, err := EntryFromWire(EntryToWire(e))
	if err != nil || got != e {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	_, err = EntryFromWire(&pb.MountEntry{Prefix: "/a", Vpart: 4096 + 3, Target: "/"})
	if err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("vpart 4099 accepted: %v", err)
	}
}

// Every request message keeps the routing fields' numbers for their
// purpose and type, so that a router reads them right: a field 2 that is
// a host name would be routed as a path.
func TestRequestsKeepTheRoutingFields(t *testing.T) {
	want := map[protowire.Number]struct {
		names []string
		kind  protoreflect.Kind
	}{
		FieldIno:       {[]string{"ino", "parent"}, protoreflect.Uint64Kind},
		FieldPath:      {[]string{"path"}, protoreflect.StringKind},
		FieldNewParent: {[]string{"new_parent"}, protoreflect.Uint64Kind},
		FieldNewPath:   {[]string{"new_path"}, protoreflect.StringKind},
	}
	seen := map[protoreflect.FullName]bool{}
	for num := range pb.Method_name {
		req := NewRequest(pb.Method(num))
		if req == nil || Lookup(pb.Method(num)).Route == RouteLocal {
			continue // routers do not read what they answer themselves
		}
		md := req.ProtoReflect().Descriptor()
		if seen[md.FullName()] {
			continue
		}
		seen[md.FullName()] = true
		fields := md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			w, routing := want[fd.Number()]
			switch {
			case routing && (!slices.Contains(w.names, string(fd.Name())) || fd.Kind() != w.kind):
				t.Errorf("%s: field %d is %s %s, but routers read field %d as %v %v",
					md.FullName(), fd.Number(), fd.Kind(), fd.Name(), fd.Number(), w.kind, w.names)
			case !routing && fd.Number() < 10 && fd.Number() != 3 && fd.Number() != 6 && fd.Number() != FieldSeven && fd.Number() != FieldEight && fd.Number() != FieldNine:
				t.Errorf("%s: field %d (%s) takes a routing field's number", md.FullName(), fd.Number(), fd.Name())
			}
		}
	}
}
