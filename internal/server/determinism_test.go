package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/vfs"
)

// Two state machines fed the same records, one of them restarted midway
// from a checkpoint of its own, write byte-identical checkpoint files at
// the end: neither the sessions of several clients, nor the retry cache,
// nor the frees of files closed by a session end depend on Go's map
// order. The live one that made the records writes the same bytes too.
func TestCheckpointsAreDeterministic(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	newSM := func() *stateMachine {
		sm := newStateMachine(48, 500*time.Nanosecond, quiet) // small: entries are evicted by count and by age
		sm.eng = engine.New(0, 1)
		sm.nextLSN = 1
		return sm
	}
	live := newSM()
	rng := rand.New(rand.NewPCG(14, 1))
	var recs [][]byte
	var now int64 = 10
	var call uint64
	do := func(client byte, m pb.Method, req proto.Message) {
		call++
		payload, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		o := &op{call: &rpc.Call{Client: rpc.ClientID{client}, ID: call, Payload: payload}, method: m, req: req}
		rec, err := live.applyOp(o, now)
		if err != nil {
			t.Fatal(err)
		}
		if rec != nil {
			recs = append(recs, rec)
		}
	}
	inos := map[string]uint64{}
	for range 3000 {
		now += int64(rng.IntN(5))
		client := byte(1 + rng.IntN(6))
		name := fmt.Sprintf("/f%d", rng.IntN(40))
		switch rng.IntN(8) {
		case 0, 1:
			do(client, pb.Method_MKNOD, &pb.CreateRequest{Path: name, Mode: engine.S_IFREG | 0o644})
			if a, err := live.eng.Resolve(engine.Root, name, false); err == nil {
				inos[name] = uint64(a.Ino)
			}
		case 2, 3:
			do(client, pb.Method_OPEN, &pb.OpenRequest{Path: name})
		case 4:
			do(client, pb.Method_CLOSE, &pb.NodeRequest{Ino: inos[name]})
		case 5:
			do(client, pb.Method_UNLINK, &pb.EntryRequest{Path: name})
		case 6:
			do(client, pb.Method_SETXATTR, &pb.XattrRequest{Ino: inos[name], Name: "user.k", Value: []byte{byte(call)}})
		case 7:
			if rng.IntN(4) == 0 {
				rec, err := live.applyOp(&op{gone: true, client: rpc.ClientID{client}}, now)
				if err != nil {
					t.Fatal(err)
				}
				if rec != nil {
					recs = append(recs, rec)
				}
			}
		}
	}
	if len(live.sessions) < 2 || live.eng.Orphans() == 0 {
		t.Fatalf("workload too tame: %d sessions, %d orphans at the end", len(live.sessions), live.eng.Orphans())
	}

	replay := func(sm *stateMachine, from int, recs [][]byte) {
		t.Helper()
		for i, rec := range recs {
			if err := sm.replayRecord(uint64(from+i+1), rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	full := newSM()
	replay(full, 0, recs)
	half := len(recs) / 2
	first := newSM()
	replay(first, 0, recs[:half])
	restarted := newSM()
	if err := restarted.decodeState(bytes.NewReader(encodeBytes(t, first))); err != nil {
		t.Fatal(err)
	}
	restarted.nextLSN = uint64(half) + 1
	replay(restarted, half, recs[half:])

	file := func(sm *stateMachine) []byte {
		t.Helper()
		dir := t.TempDir()
		body, err := sm.encodeState()
		if err != nil {
			t.Fatal(err)
		}
		if err := writeCheckpoint(vfs.Default, dir, &checkpointJob{lsn: sm.nextLSN - 1, body: body}); err != nil {
			t.Fatal(err)
		}
		names, _ := filepath.Glob(filepath.Join(dir, "checkpoint-*"))
		if len(names) != 1 {
			t.Fatalf("checkpoint files %v", names)
		}
		data, err := os.ReadFile(names[0])
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	want := file(live)
	if got := file(full); !bytes.Equal(got, want) {
		t.Error("the replayed state's checkpoint differs from the live one's")
	}
	if got := file(restarted); !bytes.Equal(got, want) {
		t.Error("the checkpoint of the state restarted midway differs from the live one's")
	}
}
