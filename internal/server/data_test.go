package server

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/layout"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
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
	for _, how := range []string{"close", "disconnect", "restart", "restart-from-checkpoint"} {
		t.Run(how, func(t *testing.T) {
			cfg := Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
			if how == "restart-from-checkpoint" {
				cfg.CheckpointEvery = 1
			}
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
			case "restart", "restart-from-checkpoint":
				if how == "restart-from-checkpoint" {
					// Wait for a checkpoint that holds the deleted open file.
					waitCheckpoint(t, b, cfg.Dir, srv.Status().LSN)
				}
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

// Opens are checked like open(2); one that succeeds is logged, one that
// fails is not, and neither waits for an fsync.
func TestOpenChecksAccess(t *testing.T) {
	srv, addr := openAndServe(t, Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	c := dialRaw(t, addr)
	c.must(pb.Method_MKNOD, &pb.CreateRequest{Path: "/ro", Mode: engine.S_IFREG | 0o444}, nil)
	records, syncs := srv.Stats().Records, srv.Stats().Syncs
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
	if got := srv.Stats().Records; got != records+1 {
		t.Fatalf("opens wrote %d log records, want 1 (the one that succeeded)", got-records)
	}
	if got := srv.Stats().Syncs; got != syncs {
		t.Fatalf("opens took %d fsyncs, want none", got-syncs)
	}
}

// dataDigest renders the data state of the files inos of e: sizes and
// views, the garbage list, the slices in use and the allocator.
func dataDigest(t *testing.T, e *engine.Engine, inos []uint64) string {
	t.Helper()
	var b strings.Builder
	for _, ino := range inos {
		a, views, err := e.ReadChunks(engine.Ino(ino), 0, 4)
		fmt.Fprintf(&b, "%d: size %d mtime %d err %v views %v\n", ino, a.Size, a.Mtime, err, views)
	}
	g, _ := e.ListGarbage(0, engine.MaxListSlices, 0)
	u, _ := e.ListSlices(0, engine.MaxListSlices)
	fmt.Fprintf(&b, "garbage %v\nused %v\nnext %d\n", g, u, e.NextSliceID())
	return b.String()
}

// Recovery from checkpoints and the log rebuilds the data state exactly:
// views, garbage (with its times), slices in use and the allocator.
func TestRecoveryRebuildsDataState(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), CheckpointEvery: 7, Logger: slog.New(slog.DiscardHandler)}
	srv, addr := openAndServe(t, cfg)
	c := dialRaw(t, addr)
	rng := rand.New(rand.NewPCG(1, 2))
	var inos, gone []uint64
	for i := range 4 {
		inos = append(inos, c.create(fmt.Sprintf("/f%d", i)))
	}
	for i := range 300 {
		ino := inos[rng.IntN(len(inos))]
		switch r := rng.IntN(10); {
		case r < 6:
			c.write(ino, uint64(rng.IntN(3))*layout.ChunkSize+uint64(rng.IntN(5000)), uint32(1+rng.IntN(5000)))
		case r < 8:
			c.must(pb.Method_SETATTR, &pb.SetattrRequest{Ino: ino, Valid: engine.SetSize, Size: uint64(rng.IntN(3 * layout.ChunkSize))}, nil)
		case r < 9:
			g := c.garbage()
			var ids []uint64
			for id := range g {
				ids = append(ids, id)
			}
			c.must(pb.Method_PURGE, &pb.PurgeRequest{Ino: 1, Ids: ids}, nil)
		default:
			name := fmt.Sprintf("/g%d", i)
			ino := c.create(name)
			c.write(ino, 0, 10)
			gone = append(gone, ino)
			c.must(pb.Method_UNLINK, &pb.EntryRequest{Path: name}, nil)
		}
	}
	srv.Close() // the loops have stopped: the engine can be read here
	inos = append(inos, gone...)
	want := dataDigest(t, srv.apply.state.eng, inos)
	for range 2 { // twice: recovery is deterministic and changes nothing on disk
		r, err := recoverOffline(cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := dataDigest(t, r.eng, inos)
		r.wal.Close()
		if got != want {
			t.Fatalf("recovered data state differs:\n got %s\nwant %s", got, want)
		}
		if err := r.eng.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

// The data path's gauges follow the engine: open files, orphans, garbage.
func TestDataGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, addr := openAndServe(t, Config{Dir: t.TempDir(), Metrics: reg, Logger: slog.New(slog.DiscardHandler)})
	c := dialRaw(t, addr)
	gauge := func(name string) float64 { t.Helper(); return metric(t, reg, name) }
	ino := c.create("/f")
	c.write(ino, 0, 10)
	c.must(pb.Method_OPEN, &pb.OpenRequest{Ino: ino}, nil)
	c.must(pb.Method_UNLINK, &pb.EntryRequest{Path: "/f"}, nil)
	c.garbage() // a read after the unlink: the gauges are stored after its batch
	if o, f, g := gauge("canopy_meta_orphans"), gauge("canopy_meta_open_files"), gauge("canopy_meta_garbage_slices"); o != 1 || f != 1 || g != 0 {
		t.Fatalf("while open: orphans %v, open files %v, garbage %v", o, f, g)
	}
	c.must(pb.Method_CLOSE, &pb.NodeRequest{Ino: ino}, nil)
	c.garbage()
	if o, f, g := gauge("canopy_meta_orphans"), gauge("canopy_meta_open_files"), gauge("canopy_meta_garbage_slices"); o != 0 || f != 0 || g != 1 {
		t.Fatalf("after close: orphans %v, open files %v, garbage %v", o, f, g)
	}
}

// waitCheckpoint waits until dir holds a checkpoint at lsn or later,
// calling the server through c meanwhile: the apply loop starts a
// checkpoint after a batch, when none is being written.
func waitCheckpoint(t *testing.T, c *rawClient, dir string, lsn uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, body, ok, err := wal.OpenCheckpoint(vfs.Default, dir); ok && err == nil {
			body.Close()
			if got >= lsn {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint at lsn %d within 10s", lsn)
		}
		c.must(pb.Method_GETATTR, &pb.NodeRequest{Ino: 1}, nil)
		time.Sleep(5 * time.Millisecond)
	}
}

// A retried OPEN or CLOSE (same client, same call id) is answered from the
// retry cache: it counts once.
func TestRetriedOpenCloseCountOnce(t *testing.T) {
	s := &stateMachine{eng: engine.New(0, 1), cache: newRetryCache(16), sessions: make(sessions), log: slog.New(slog.DiscardHandler)}
	f, err := s.eng.Mknod(engine.Root, s.eng.Root(), "f", engine.S_IFREG|0o644, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	client := rpc.ClientID{7}
	run := func(m pb.Method, req proto.Message, id uint64) uint32 {
		o := &op{call: &rpc.Call{Client: client, ID: id}, method: m, req: req}
		if _, err := s.applyOp(o, 3); err != nil {
			t.Fatal(err)
		}
		return o.status
	}
	for range 2 {
		if st := run(pb.Method_OPEN, &pb.OpenRequest{Ino: uint64(f.Ino)}, 1); st != 0 {
			t.Fatalf("open: %d", st)
		}
	}
	if n := s.eng.Opens(f.Ino); n != 1 {
		t.Fatalf("%d opens after a retried open, want 1", n)
	}
	if st := run(pb.Method_OPEN, &pb.OpenRequest{Ino: uint64(f.Ino)}, 2); st != 0 || s.eng.Opens(f.Ino) != 2 {
		t.Fatalf("second open: %d, %d opens", st, s.eng.Opens(f.Ino))
	}
	for range 2 {
		if st := run(pb.Method_CLOSE, &pb.NodeRequest{Ino: uint64(f.Ino)}, 3); st != 0 {
			t.Fatalf("close: %d", st)
		}
	}
	if n := s.eng.Opens(f.Ino); n != 1 {
		t.Fatalf("%d opens after a retried close, want 1", n)
	}
	if _, err := s.applyOp(&op{gone: true, client: client}, 4); err != nil {
		t.Fatal(err)
	}
	if n := s.eng.Opens(f.Ino); n != 0 || len(s.sessions) != 0 {
		t.Fatalf("after release: %d opens, %d sessions", n, len(s.sessions))
	}
	if st := run(pb.Method_CLOSE, &pb.NodeRequest{Ino: uint64(f.Ino)}, 4); syscall.Errno(st) != syscall.EBADF {
		t.Fatalf("close after release: %d, want EBADF", st)
	}
}

// Replay frees what the logged run freed, when it freed it, and keeps
// only the files that were open when they lost their last link: a closed
// file unlinked and its slice purged leaves no garbage behind after
// recovery, and a file kept open takes the commits its writer made after
// the unlink. Nothing is checkpointed after the start, so recovery replays
// all of it.
func TestReplayKeepsOnlyOpenOrphans(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), CheckpointEvery: 1 << 30, Logger: slog.New(slog.DiscardHandler)}
	srv, addr := openAndServe(t, cfg)
	c := dialRaw(t, addr)
	closed := c.create("/closed")
	gone := c.write(closed, 0, 10)
	c.must(pb.Method_UNLINK, &pb.EntryRequest{Path: "/closed"}, nil)
	c.must(pb.Method_PURGE, &pb.PurgeRequest{Ino: 1, Ids: []uint64{gone}}, nil)
	open := c.create("/open")
	c.write(open, 0, 10)
	c.must(pb.Method_OPEN, &pb.OpenRequest{Ino: open, Flags: uint32(syscall.O_RDWR)}, nil)
	c.must(pb.Method_UNLINK, &pb.EntryRequest{Path: "/open"}, nil)
	c.write(open, 100, 20) // the writer goes on after the unlink
	srv.Close()
	r, err := recoverOffline(cfg)
	if err != nil {
		t.Fatalf("recovery: %v", err)
	}
	defer r.wal.Close()
	if r.eng.Orphans() != 0 {
		t.Fatalf("%d orphans after recovery", r.eng.Orphans())
	}
	// The open file is freed at the restart: its slices are garbage now,
	// which the logged run (where it is still open) does not have yet.
	g, _ := r.eng.ListGarbage(0, engine.MaxListSlices, 0)
	for _, s := range g {
		if s.ID == gone {
			t.Fatalf("purged slice %d is garbage again after recovery", gone)
		}
	}
	if len(g) != 2 {
		t.Fatalf("garbage after recovery %v, want the open file's two slices", g)
	}
}
