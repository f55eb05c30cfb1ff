package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"syscall"
	"testing"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// writeInline allocates one slice id and commits data as the whole
// content of file ino, inline, returning the id.
func (r *rawClient) writeInline(ino uint64, data []byte) uint64 {
	r.t.Helper()
	var al pb.AllocSlicesReply
	r.must(pb.Method_ALLOC_SLICES, &pb.AllocSlicesRequest{Ino: ino, Count: 1}, &al)
	n := uint32(len(data))
	r.must(pb.Method_COMMIT, &pb.CommitRequest{Ino: ino, Writes: []*pb.SliceWrite{{
		Slice: &pb.Slice{Id: al.First, Size: n, Len: n}, Data: data,
	}}, Size: uint64(n)}, nil)
	return al.First
}

// TestInlineOverRPCAndRecovery: small files committed with their bytes
// inline are read back with them (READ_CHUNKS), listed (LIST_INLINE),
// survive recovery from checkpoints and the log, and go from memory once
// INLINE_STORED says their objects are stored, in the recovered state
// too.
func TestInlineOverRPCAndRecovery(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), CheckpointEvery: 5, Logger: slog.New(slog.DiscardHandler)}
	srv, addr := openAndServe(t, cfg)
	c := dialRaw(t, addr)
	var vol pb.VolumeReply
	c.must(pb.Method_VOLUME, &pb.NodeRequest{Ino: 1}, &vol)
	if vol.InlineMax != engine.MaxInlineSlice {
		t.Fatalf("VOLUME inline_max %d, want %d", vol.InlineMax, engine.MaxInlineSlice)
	}
	want := map[uint64][]byte{}
	var inos []uint64
	for i := range 12 {
		ino := c.create(fmt.Sprintf("/f%d", i))
		data := bytes.Repeat([]byte{byte('a' + i)}, 100+i)
		id := c.writeInline(ino, data)
		want[id] = data
		inos = append(inos, ino)
	}
	var rc pb.ReadChunksReply
	c.must(pb.Method_READ_CHUNKS, &pb.ReadChunksRequest{Ino: inos[3]}, &rc)
	if len(rc.Inline) != 1 || !bytes.Equal(rc.Inline[0].Data, want[rc.Inline[0].Id]) || rc.Chunks[0].Slices[0].Id != rc.Inline[0].Id {
		t.Fatalf("READ_CHUNKS of an inline file: %v", &rc)
	}
	var li pb.ListInlineReply
	c.must(pb.Method_LIST_INLINE, &pb.ListSlicesRequest{Ino: 1, Limit: 5}, &li)
	if len(li.Slices) != 5 || li.Eof {
		t.Fatalf("LIST_INLINE page of 5: %d slices, eof %v", len(li.Slices), li.Eof)
	}
	stored := []uint64{li.Slices[0].Id, li.Slices[1].Id}
	c.must(pb.Method_INLINE_STORED, &pb.PurgeRequest{Ino: 1, Ids: stored}, nil)
	// A commit that carries bytes the wrong way is refused whole.
	bad := c.create("/bad")
	var al pb.AllocSlicesReply
	c.must(pb.Method_ALLOC_SLICES, &pb.AllocSlicesRequest{Ino: bad, Count: 1}, &al)
	if st := c.call(pb.Method_COMMIT, &pb.CommitRequest{Ino: bad, Writes: []*pb.SliceWrite{{
		Slice: &pb.Slice{Id: al.First, Size: 3, Len: 3, Pos: 1}, Data: []byte("abc")}}}, nil); st != syscall.EINVAL {
		t.Fatalf("an inline write at pos 1: %v, want EINVAL", st)
	}
	srv.Close()
	for _, e := range []*engine.Engine{srv.apply.state.eng, recoveredEngine(t, cfg)} {
		list, eof := e.ListInline(0, 0)
		if !eof || len(list) != len(want)-len(stored) {
			t.Fatalf("%d inline slices, want %d", len(list), len(want)-len(stored))
		}
		for _, s := range list {
			if !bytes.Equal(s.Data, want[s.ID]) || slices.Contains(stored, s.ID) {
				t.Fatalf("inline slice %d: %q", s.ID, s.Data)
			}
		}
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

// recoveredEngine recovers cfg's state offline and returns its engine.
func recoveredEngine(t *testing.T, cfg Config) *engine.Engine {
	t.Helper()
	r, err := recoverOffline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.wal.Close()
	return r.eng
}
