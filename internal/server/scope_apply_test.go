package server

import (
	"errors"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
)

// TestScopedEntryRecheckedAtApply: a call of a credential scoped to
// /tenants/a is confined as a leader confines it before proposing it
// (naming the directory /tenants/a/d by inode); another credential's
// entry, applied first, moves d out of the subtree. The scoped entry,
// applied after it, is refused with EACCES and creates nothing, on the
// moved directory or anywhere; the same entry with d back inside applies.
func TestScopedEntryRecheckedAtApply(t *testing.T) {
	sm := newStateMachine(64, time.Hour, slog.New(slog.DiscardHandler))
	sm.eng = engine.New(1, 1)
	sm.nextLSN = 1
	root := sm.eng.Root()
	mkdir := func(parent engine.Ino, name string) engine.Ino {
		t.Helper()
		a, err := sm.eng.Mkdir(engine.Root, parent, name, 0o777, 1)
		if err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	tenants := mkdir(root, "tenants")
	a := mkdir(tenants, "a")
	d := mkdir(a, "d")
	outside := mkdir(root, "outside")

	sess := &session{cred: &auth.Credential{Name: "tenant", Path: "/tenants/a"}}
	client := rpc.ClientID{7}
	var calls uint64
	confined := func(name string) *pb.LogRecord {
		t.Helper()
		calls++
		req := &pb.CreateRequest{Path: "/d/" + name, Mode: engine.S_IFREG | 0o644}
		payload, _ := proto.Marshal(req)
		o := &op{call: &rpc.Call{Client: client, ID: calls, Payload: payload}, method: pb.Method_MKNOD, req: req,
			cred: engine.Cred{UID: 1000, GID: 1000}, sess: sess}
		if st := sm.confine(o, sm.grants); st != 0 {
			t.Fatalf("confine: status %d", st)
		}
		if o.scopeTop != a {
			t.Fatalf("confined to %d, want the top %d", o.scopeTop, a)
		}
		r := &replicated{cfg: &Config{Clock: func() int64 { return 2 }}}
		return r.record(o)
	}
	rename := func(from engine.Ino, to engine.Ino) {
		t.Helper()
		req := &pb.RenameRequest{Parent: uint64(from), Name: "d", NewParent: uint64(to), NewName: "d"}
		payload, _ := proto.Marshal(req)
		calls++
		rec := &pb.LogRecord{TimeNs: 3, ClientId: []byte("another-client-1"), CallId: calls, Method: uint32(pb.Method_RENAME), Request: payload}
		if st, _, err := sm.Apply(rec, nil); err != nil || st != 0 {
			t.Fatalf("rename: status %d, %v", st, err)
		}
	}

	rec := confined("f") // proposed while d is inside
	rename(a, outside)   // applied before it
	st, _, err := sm.Apply(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if syscall.Errno(st) != syscall.EACCES {
		t.Fatalf("scoped create in a directory moved out meanwhile: status %d, want EACCES", st)
	}
	for _, dir := range []engine.Ino{d, a, outside} {
		if _, err := sm.eng.Lookup(engine.Root, dir, "f"); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("f in directory %d after the refused entry: %v", dir, err)
		}
	}

	rename(outside, a) // d back inside
	if st, _, err := sm.Apply(confined("g"), nil); err != nil || st != 0 {
		t.Fatalf("scoped create inside: status %d, %v", st, err)
	}
	if _, err := sm.eng.Lookup(engine.Root, d, "g"); err != nil {
		t.Fatalf("g not created: %v", err)
	}
}
