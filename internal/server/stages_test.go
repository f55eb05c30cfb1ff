package server

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/wal"
)

// Tests of the stages one at a time, each given a fake environment.

// fakeLog is a commitLog that notes what is done to it in events.
type fakeLog struct {
	events  *[]string
	lsn     uint64
	failing bool // Sync fails
}

func (l *fakeLog) Append(recs ...[]byte) (uint64, error) {
	l.lsn += uint64(len(recs))
	*l.events = append(*l.events, fmt.Sprintf("append %d", len(recs)))
	return l.lsn, nil
}

func (l *fakeLog) Sync() error {
	*l.events = append(*l.events, "sync")
	if l.failing {
		return errors.New("disk gone")
	}
	return nil
}

func (l *fakeLog) Flush() (wal.Flushed, error) {
	*l.events = append(*l.events, "flush")
	return wal.Flushed{}, nil
}

// SyncFlushed runs on the syncer's goroutine: it notes nothing in events.
func (l *fakeLog) SyncFlushed(wal.Flushed) error { return nil }

func (l *fakeLog) TruncateBefore(lsn uint64) error {
	*l.events = append(*l.events, fmt.Sprintf("truncate %d", lsn))
	return nil
}

// The committer makes a batch's records durable with one append and one
// sync before it hands the batch to the reply stage; a batch without
// records goes straight on, one whose records are session changes only
// (sync unset) is appended but not synced; a failed sync fails the server and reaches
// the replies as an error; a checkpoint goes to the checkpointer only
// after its batch's replies; truncations are done between batches.
func TestCommitterAlone(t *testing.T) {
	var events []string
	log := &fakeLog{events: &events}
	in := make(chan *batch)
	truncs := make(chan uint64)
	ckpts := make(chan *checkpointJob, 4)
	var failed error
	var st stats
	c := &committer{
		log: log, in: in, truncs: truncs, ckpts: ckpts,
		deliver: func(b *batch, err error) {
			events = append(events, fmt.Sprintf("deliver %d ops, err %v", len(b.ops), err))
			if b.ckpt != nil && len(ckpts) != 0 {
				t.Error("checkpoint handed on before its batch's replies")
			}
		},
		fail:    func(err error) { failed = err },
		stats:   &st,
		metrics: newMetrics(nil, nil, nil),
		logger:  slog.New(slog.DiscardHandler),
	}
	done := make(chan struct{})
	go func() { c.run(); close(done) }()

	job := &checkpointJob{lsn: 2}
	in <- &batch{ops: make([]*op, 3), recs: [][]byte{{1}, {2}}, ckpt: job}
	in <- &batch{ops: make([]*op, 1)}                      // reads only
	in <- &batch{ops: make([]*op, 1), recs: [][]byte{{9}}} // an OPEN
	truncs <- 1
	log.failing = true
	in <- &batch{ops: make([]*op, 2), recs: [][]byte{{3}}, sync: true}
	close(in)
	<-done

	want := []string{
		"append 2", "sync", "deliver 3 ops, err <nil>",
		"deliver 1 ops, err <nil>",
		"append 1", "deliver 1 ops, err <nil>",
		"truncate 1",
		"append 1", "sync", "deliver 2 ops, err disk gone",
	}
	if !slices.Equal(events, want) {
		t.Fatalf("events:\n got %q\nwant %q", events, want)
	}
	if failed == nil {
		t.Error("a failed sync did not fail the server")
	}
	if got := <-ckpts; got != job {
		t.Errorf("checkpointer got %v, want the batch's job", got)
	}
	if _, open := <-ckpts; open {
		t.Error("ckpts not closed when the committer ended")
	}
	if st.syncs.Load() != 1 || st.records.Load() != 4 || st.batches.Load() != 4 || st.lsn.Load() != 4 {
		t.Errorf("stats: %d syncs, %d records, %d batches, lsn %d; want 1, 4, 4, 4",
			st.syncs.Load(), st.records.Load(), st.batches.Load(), st.lsn.Load())
	}
}

// While both classes wait, the apply stage takes ReadShare reads of every
// 10 operations of a batch, and no more than MaxBatch.
func TestApplierBatchShares(t *testing.T) {
	reads, writes := make(chan *op, 20), make(chan *op, 20)
	for i := range 20 {
		reads <- &op{method: pb.Method_GETATTR, client: rpc.ClientID{byte(i)}}
		writes <- &op{method: pb.Method_MKDIR, client: rpc.ClientID{byte(i)}}
	}
	a := &applier{cfg: &Config{MaxBatch: 10, ReadShare: 7}}
	r, w := (<-chan *op)(reads), (<-chan *op)(writes)
	b := a.nextBatch(&r, &w)
	var got []string
	for _, o := range b.ops {
		got = append(got, fmt.Sprintf("%s%d", o.method, o.client[0]))
	}
	want := []string{"GETATTR0", "GETATTR1", "GETATTR2", "GETATTR3", "GETATTR4", "GETATTR5", "GETATTR6", "GETATTR7",
		"MKDIR0", "MKDIR1"}
	if !slices.Equal(got, want) {
		t.Fatalf("batch %v, want %v", got, want)
	}
}

// The live path and log replay go through the same state machine: the
// records the live path writes, replayed on the namespace it started
// from, give the same state (namespace, sessions, retry cache, clock)
// and the same log position, including a file kept open past its unlink,
// and then its free when its client goes.
func TestStateMachineReplayMatchesLive(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	live := newStateMachine(64, time.Hour, quiet)
	live.eng = engine.New(0, 1)
	live.nextLSN = 1
	client := rpc.ClientID{9}
	var recs [][]byte
	var id uint64
	run := func(m pb.Method, req proto.Message) *op {
		t.Helper()
		id++
		payload, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		o := &op{call: &rpc.Call{Client: client, ID: id, Payload: payload}, method: m, req: req}
		rec, err := live.applyOp(o, int64(10+id))
		if err != nil {
			t.Fatal(err)
		}
		if o.status != 0 {
			t.Fatalf("%s: status %d", m, o.status)
		}
		if rec != nil {
			recs = append(recs, rec)
		}
		return o
	}
	run(pb.Method_MKDIR, &pb.CreateRequest{Path: "/d", Mode: 0o755})
	f := run(pb.Method_MKNOD, &pb.CreateRequest{Path: "/d/f", Mode: engine.S_IFREG | 0o644})
	ino := f.reply.(*pb.AttrReply).Attr.Ino
	run(pb.Method_SETXATTR, &pb.XattrRequest{Path: "/d/f", Name: "user.k", Value: []byte("v")})
	run(pb.Method_OPEN, &pb.OpenRequest{Ino: ino})
	run(pb.Method_RENAME, &pb.RenameRequest{Path: "/d/f", NewPath: "/g"})
	run(pb.Method_UNLINK, &pb.EntryRequest{Path: "/g"}) // f is open: kept as an orphan
	run(pb.Method_GETATTR, &pb.NodeRequest{Path: "/d"})
	if len(recs) != 6 {
		t.Fatalf("%d log records, want 6 (mutations and the OPEN)", len(recs))
	}
	if live.eng.Orphans() != 1 {
		t.Fatalf("%d orphans live, want 1", live.eng.Orphans())
	}

	// Checkpoint the state with the orphan open; then the client goes.
	midway, err := live.encodeState()
	if err != nil {
		t.Fatal(err)
	}
	midwayAt := len(recs)
	gone, err := live.applyOp(&op{gone: true, client: client}, 40)
	if err != nil || gone == nil {
		t.Fatalf("client gone: record %v, err %v", gone, err)
	}
	recs = append(recs, gone)
	if live.eng.Orphans() != 0 || len(live.sessions) != 0 {
		t.Fatalf("after the client went: %d orphans, %d sessions", live.eng.Orphans(), len(live.sessions))
	}

	replayed := newStateMachine(64, time.Hour, quiet)
	replayed.eng = engine.New(0, 1)
	replayed.nextLSN = 1
	for i, rec := range recs {
		if err := replayed.replayRecord(uint64(i+1), rec); err != nil {
			t.Fatal(err)
		}
	}
	if replayed.nextLSN != live.nextLSN || replayed.lastNow != live.lastNow {
		t.Errorf("replay at lsn %d, time %d; live at %d, %d", replayed.nextLSN, replayed.lastNow, live.nextLSN, live.lastNow)
	}
	var liveKeys, replayedKeys []callKey
	live.cache.each(func(k callKey, o outcome) { liveKeys = append(liveKeys, k) })
	replayed.cache.each(func(k callKey, _ outcome) { replayedKeys = append(replayedKeys, k) })
	if !slices.Equal(liveKeys, replayedKeys) || len(replayedKeys) != 6 {
		t.Errorf("retry cache after replay %v, live %v", replayedKeys, liveKeys)
	}
	// A third state machine starts from the checkpoint taken midway and
	// replays the rest: all three encode the same bytes.
	restarted := newStateMachine(64, time.Hour, quiet)
	if err := restarted.decodeState(bytes.NewReader(bytes.Join(midway, nil))); err != nil {
		t.Fatal(err)
	}
	if restarted.eng.Opens(engine.Ino(ino)) != 1 {
		t.Fatalf("checkpoint gave back %d opens of the orphan, want 1", restarted.eng.Opens(engine.Ino(ino)))
	}
	restarted.nextLSN = uint64(midwayAt) + 1
	for i, rec := range recs[midwayAt:] {
		if err := restarted.replayRecord(uint64(midwayAt+i+1), rec); err != nil {
			t.Fatal(err)
		}
	}
	want := encodeBytes(t, live)
	if got := encodeBytes(t, replayed); !bytes.Equal(got, want) {
		t.Error("replayed state encodes differently from the live one")
	}
	if got := encodeBytes(t, restarted); !bytes.Equal(got, want) {
		t.Error("state restarted from the checkpoint encodes differently from the live one")
	}
	if live.eng.GarbageLen() != replayed.eng.GarbageLen() || restarted.nextLSN != live.nextLSN {
		t.Errorf("garbage %d live, %d replayed; lsn %d restarted, %d live",
			live.eng.GarbageLen(), replayed.eng.GarbageLen(), restarted.nextLSN, live.nextLSN)
	}
}

// encodeBytes returns sm's checkpoint body.
func encodeBytes(t *testing.T, sm *stateMachine) []byte {
	t.Helper()
	body, err := sm.encodeState()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Join(body, nil)
}
