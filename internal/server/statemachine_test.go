package server

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// listGarbage returns the whole garbage list, with sizes and times.
func (r *rawClient) listGarbage() []*pb.SliceRef {
	r.t.Helper()
	var g pb.ListSlicesReply
	r.must(pb.Method_LIST_GARBAGE, &pb.ListSlicesRequest{Ino: 1, Limit: engine.MaxListSlices}, &g)
	return g.Slices
}

// A file unlinked while open whose client then goes (its connection
// closes) is freed by the session-end record: a server restarted after it
// replays the frees at the record's time, not the restart's, and its
// garbage list and next inode are those of a twin that never restarted.
func TestClientGoneFreesReplayIdentically(t *testing.T) {
	var now atomic.Int64
	clock := func() int64 { return now.Load() }
	type result struct {
		garbage []*pb.SliceRef
		next    uint64
	}
	run := func(restart bool) result {
		now.Store(1_000)
		cfg := Config{Dir: t.TempDir(), Clock: clock, Logger: slog.New(slog.DiscardHandler)}
		srv, addr := openAndServe(t, cfg)
		a, b := dialRaw(t, addr), dialRaw(t, addr)
		ino := a.create("/f")
		first := a.write(ino, 0, 100)
		a.must(pb.Method_OPEN, &pb.OpenRequest{Path: "/f", Flags: uint32(syscall.O_RDWR)}, nil)
		b.must(pb.Method_UNLINK, &pb.EntryRequest{Path: "/f"}, nil)
		a.write(ino, 100, 20) // the writer goes on after the unlink
		b.create("/other")
		now.Store(5_000)
		a.c.Close()
		deadline := time.Now().Add(10 * time.Second)
		for !b.garbage()[first] {
			if time.Now().After(deadline) {
				t.Fatal("the departed client's orphan was not freed within 10s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if restart {
			shutdown(t, srv)
			now.Store(9_000)
			_, addr = openAndServe(t, cfg)
			b = dialRaw(t, addr)
		}
		return result{garbage: b.listGarbage(), next: b.create("/next")}
	}
	twin, restarted := run(false), run(true)
	if len(twin.garbage) != 2 {
		t.Fatalf("twin's garbage %v, want the orphan's two slices", twin.garbage)
	}
	for _, s := range twin.garbage {
		if s.FreedNs != 5_000 {
			t.Errorf("twin: slice %d freed at %d, want 5000 (the session end)", s.Id, s.FreedNs)
		}
	}
	if !slices.EqualFunc(twin.garbage, restarted.garbage, func(a, b *pb.SliceRef) bool { return proto.Equal(a, b) }) {
		t.Errorf("garbage after restart %v, twin %v", restarted.garbage, twin.garbage)
	}
	if twin.next != restarted.next {
		t.Errorf("next inode %d after restart, %d in the twin", restarted.next, twin.next)
	}
}

// A server stopped while a client has an unlinked file open frees it at
// the next start by logging a record that ends every session; recovering
// again replays that record to the same state, whatever the clock says
// then, and logs no second one.
func TestRestartRecordReplaysIdentically(t *testing.T) {
	var now atomic.Int64
	now.Store(1_000)
	cfg := Config{Dir: t.TempDir(), Clock: func() int64 { return now.Load() }, Logger: slog.New(slog.DiscardHandler)}
	srv, addr := openAndServe(t, cfg)
	c := dialRaw(t, addr)
	ino := c.create("/f")
	c.write(ino, 0, 100)
	c.must(pb.Method_OPEN, &pb.OpenRequest{Path: "/f", Flags: uint32(syscall.O_RDWR)}, nil)
	c.must(pb.Method_UNLINK, &pb.EntryRequest{Path: "/f"}, nil)
	srv.Close()

	recoverAt := func(at int64) (state []byte, lsn uint64, garbage []engine.SliceRef) {
		t.Helper()
		now.Store(at)
		r, err := recoverOffline(cfg)
		if err != nil {
			t.Fatalf("recovery: %v", err)
		}
		defer r.wal.Close()
		if r.eng.Orphans() != 0 || len(r.sessions) != 0 {
			t.Fatalf("after recovery: %d orphans, %d sessions", r.eng.Orphans(), len(r.sessions))
		}
		g, _ := r.eng.ListGarbage(0, engine.MaxListSlices, 0)
		return encodeBytes(t, r.stateMachine), r.wal.LastLSN(), g
	}
	first, lsn1, g1 := recoverAt(5_000)
	second, lsn2, g2 := recoverAt(9_000)
	if len(g1) != 1 || !slices.Equal(g1, g2) {
		t.Fatalf("garbage after the first recovery %v, after the second %v", g1, g2)
	}
	if lsn1 != lsn2 {
		t.Errorf("log ends at %d after the first recovery, %d after the second: the second logged again", lsn1, lsn2)
	}
	if !bytes.Equal(first, second) {
		t.Error("the second recovery's state differs from the first's")
	}
}

// Retry-cache entries expire by the time the records carry: the live
// path and a replay of its records forget the same entries, and a retry
// of a forgotten call is applied again.
func TestRetryCacheExpiresByRecordTime(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	const ttl = 100
	live := newStateMachine(64, ttl, quiet)
	live.eng = engine.New(0, 1)
	live.nextLSN = 1
	client := rpc.ClientID{3}
	var recs [][]byte
	mkdir := func(id uint64, path string, at int64) uint32 {
		t.Helper()
		req := &pb.CreateRequest{Path: path, Mode: 0o755}
		payload, _ := proto.Marshal(req)
		o := &op{call: &rpc.Call{Client: client, ID: id, Payload: payload}, method: pb.Method_MKDIR, req: req}
		rec, err := live.applyOp(o, at)
		if err != nil {
			t.Fatal(err)
		}
		if rec != nil {
			recs = append(recs, rec)
		}
		return o.status
	}
	mkdir(1, "/a", 10)
	mkdir(2, "/b", 60)
	mkdir(3, "/c", 150) // the clock is now 150: /a's entry (10) has expired, /b's (60) not
	keys := func(sm *stateMachine) (ids []uint64) {
		sm.cache.each(func(k callKey, _ outcome) { ids = append(ids, k.call) })
		return ids
	}
	if got := keys(live); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("live cache holds calls %v, want [2 3]", got)
	}
	// A retry of call 2 is answered from the cache; one of call 1 is
	// applied again, and fails: /a exists.
	if st := mkdir(2, "/b", 155); st != 0 || live.retryHits.Load() != 1 {
		t.Fatalf("retry of a remembered call: status %d, %d hits", st, live.retryHits.Load())
	}
	if st := mkdir(1, "/a", 155); syscall.Errno(st) != syscall.EEXIST {
		t.Fatalf("retry of an expired call: status %d, want EEXIST", st)
	}
	mkdir(4, "/d", 200) // /b (60) expires now too
	if got := keys(live); !slices.Equal(got, []uint64{3, 4}) {
		t.Fatalf("live cache holds calls %v, want [3 4]", got)
	}

	replayed := newStateMachine(64, ttl, quiet)
	replayed.eng = engine.New(0, 1)
	replayed.nextLSN = 1
	for i, rec := range recs {
		if err := replayed.replayRecord(uint64(i+1), rec); err != nil {
			t.Fatal(err)
		}
	}
	if got := keys(replayed); !slices.Equal(got, keys(live)) {
		t.Errorf("replayed cache holds calls %v, live %v", got, keys(live))
	}
	if !bytes.Equal(encodeBytes(t, replayed), encodeBytes(t, live)) {
		t.Error("replayed state encodes differently from the live one")
	}
}

// A directory written by the version before OPEN and CLOSE were logged
// still recovers: its checkpoint ends after the retry cache, and its
// records say kept_open where a mutation took the last link of an open
// file, which a later record still names. Recovery keeps that file
// through the replay, then logs the end of every session, which frees it.
func TestRecoversLogOfPreviousVersion(t *testing.T) {
	dir := t.TempDir()
	old := engine.New(0, 1)
	var ns bytes.Buffer
	if err := old.WriteCheckpoint(&ns); err != nil {
		t.Fatal(err)
	}
	err := wal.WriteCheckpoint(vfs.Default, dir, 0, func(w io.Writer) error {
		w.Write(binary.AppendUvarint(nil, uint64(ns.Len())))
		w.Write(ns.Bytes())
		_, err := w.Write(binary.AppendUvarint(nil, 0)) // an empty retry cache, and nothing after it
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := old.Mknod(engine.Root, old.Root(), "f", engine.S_IFREG|0o644, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	record := func(call uint64, m pb.Method, req proto.Message, at int64, keptOpen bool) []byte {
		payload, _ := proto.Marshal(req)
		data, _ := proto.Marshal(&pb.LogRecord{TimeNs: at, ClientId: make([]byte, 16), CallId: call,
			Method: uint32(m), Request: payload, KeptOpen: keptOpen})
		return data
	}
	l, err := wal.Open(vfs.Default, dir, wal.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(
		record(1, pb.Method_MKNOD, &pb.CreateRequest{Path: "/f", Mode: engine.S_IFREG | 0o644}, 10, false),
		record(2, pb.Method_UNLINK, &pb.EntryRequest{Path: "/f"}, 20, true),
		record(3, pb.Method_SETXATTR, &pb.XattrRequest{Ino: uint64(f.Ino), Name: "user.k", Value: []byte("v")}, 30, false),
	); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()

	cfg := Config{Dir: dir, Clock: func() int64 { return 100 }, Logger: slog.New(slog.DiscardHandler)}
	var states [][]byte
	for range 2 {
		r, err := recoverOffline(cfg)
		if err != nil {
			t.Fatalf("recovery of the previous version's log: %v", err)
		}
		if r.eng.Orphans() != 0 || r.eng.Len() != 1 {
			t.Errorf("after recovery: %d orphans, %d nodes; want 0 and the root", r.eng.Orphans(), r.eng.Len())
		}
		if r.wal.LastLSN() != 4 {
			t.Errorf("log ends at %d, want 4: the three old records and one session end", r.wal.LastLSN())
		}
		if r.cache.len() != 3 {
			t.Errorf("retry cache holds %d calls, want 3", r.cache.len())
		}
		states = append(states, encodeBytes(t, r.stateMachine))
		r.wal.Close()
	}
	if !bytes.Equal(states[0], states[1]) {
		t.Error("recovering twice gives different states")
	}
}
