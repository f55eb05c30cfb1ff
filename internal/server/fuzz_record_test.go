package server

import (
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// FuzzApplyRecord feeds arbitrary log records, as a follower receives
// them from its leader over the network, through the state machine's
// Apply: nothing may panic, a record either applies or is refused with an
// error, the trash's days stay in range, and the namespace's invariants
// hold after it.
func FuzzApplyRecord(f *testing.F) {
	seed := func(rec *pb.LogRecord) {
		data, _ := proto.Marshal(rec)
		f.Add(data)
	}
	client := make([]byte, 16)
	mkdir, _ := proto.Marshal(&pb.CreateRequest{Path: "/d", Mode: 0o755})
	seed(&pb.LogRecord{TimeNs: 5, ClientId: client, CallId: 1, Method: uint32(pb.Method_MKDIR), Request: mkdir})
	seed(&pb.LogRecord{TimeNs: 5, Settings: &pb.Settings{TrashDays: 1 << 31}})
	seed(&pb.LogRecord{TimeNs: 5, Settings: &pb.Settings{}, SessionEnd: pb.SessionEnd_SESSION_END_ALL})
	seed(&pb.LogRecord{TimeNs: -1, Method: uint32(pb.Method_MKDIR), Request: mkdir, Settings: &pb.Settings{TrashDays: 3}})
	seed(&pb.LogRecord{ClientId: client, SessionEnd: pb.SessionEnd_SESSION_END_CLIENT})
	seed(&pb.LogRecord{SessionEnd: 7})
	f.Add([]byte{0x5a, 0x02, 0x08})

	f.Fuzz(func(t *testing.T, data []byte) {
		var rec pb.LogRecord
		if proto.Unmarshal(data, &rec) != nil {
			return
		}
		sm := newStateMachine(16, time.Minute, slog.New(slog.DiscardHandler))
		sm.eng = engine.New(0, 1)
		sm.eng.SetTrashDays(1)
		if _, err := sm.eng.Mkdir(engine.Root, sm.eng.Root(), "a", 0o755, 2); err != nil {
			t.Fatal(err)
		}
		sm.Apply(&rec, nil)
		if d := sm.eng.TrashDays(); d < 0 || d > engine.MaxTrashDays {
			t.Fatalf("trash days %d after %x", d, data)
		}
		if err := sm.eng.Check(); err != nil {
			t.Fatalf("%x: %v", data, err)
		}
	})
}
