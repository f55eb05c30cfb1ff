package data

import (
	"bytes"
	"math/rand/v2"
	"testing"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// render builds a chunk's bytes from a view the slow way: slice id's byte
// k is fill(id, k).
func fill(id uint64, k int) byte { return byte(id*31 + uint64(k)*7 + uint64(k>>8)) }

func render(slices []*pb.Slice, off, n int) []byte {
	out := make([]byte, n)
	for _, s := range slices {
		for k := 0; k < int(s.Len); k++ {
			at := int(s.Pos) + k
			if at >= off && at < off+n && s.Id != 0 {
				out[at-off] = fill(s.Id, int(s.Off)+k)
			}
		}
	}
	return out
}

func fromPlan(pcs []piece, off, n int) []byte {
	out := make([]byte, 0, n)
	at := off
	for _, p := range pcs {
		if p.pos != at {
			return nil
		}
		for k := 0; k < p.n; k++ {
			if p.id == 0 {
				out = append(out, 0)
			} else {
				out = append(out, fill(p.id, p.soff+k))
			}
		}
		at += p.n
	}
	return out
}

func TestPlanMatchesView(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const chunk = 4096
	for iter := 0; iter < 2000; iter++ {
		var slices []*pb.Slice
		pos := 0
		for pos < chunk && rng.IntN(8) != 0 {
			pos += rng.IntN(300)
			ln := 1 + rng.IntN(500)
			if pos+ln > chunk {
				break
			}
			id := uint64(rng.IntN(4))
			size := ln + rng.IntN(100)
			off := rng.IntN(size - ln + 1)
			slices = append(slices, &pb.Slice{Id: id, Size: uint32(size), Off: uint32(off), Len: uint32(ln), Pos: uint32(pos)})
			pos += ln
		}
		v := &pb.ChunkView{Slices: slices}
		if err := checkView(v, chunk); err != nil {
			t.Fatalf("valid view rejected: %v", err)
		}
		off := rng.IntN(chunk)
		n := rng.IntN(chunk - off + 1)
		got := fromPlan(plan(nil, slices, off, n), off, n)
		if want := render(slices, off, n); !bytes.Equal(got, want) {
			t.Fatalf("iter %d: plan of [%d,+%d) over %v gives other bytes", iter, off, n, slices)
		}
	}
}

func TestCheckViewRejects(t *testing.T) {
	cases := map[string][]*pb.Slice{
		"overlap":        {{Id: 1, Size: 10, Len: 10, Pos: 0}, {Id: 2, Size: 10, Len: 10, Pos: 5}},
		"past chunk":     {{Id: 1, Size: 200, Len: 200, Pos: 4000}},
		"past slice":     {{Id: 1, Size: 10, Off: 5, Len: 10, Pos: 0}},
		"out of order":   {{Id: 1, Size: 10, Len: 10, Pos: 100}, {Id: 2, Size: 10, Len: 10, Pos: 0}},
		"huge len wraps": {{Id: 1, Size: 10, Len: 1<<32 - 1, Pos: 1}},
	}
	for name, slices := range cases {
		if err := checkView(&pb.ChunkView{Slices: slices}, 4096); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseKey(t *testing.T) {
	for _, id := range []uint64{1, 999, 1000, 1234567, 1<<48 | 77, 1<<64 - 1} {
		key := blockKey(id, 3, 4096)
		gotID, ix, size, ok := parseKey(key)
		if !ok || gotID != id || ix != 3 || size != 4096 {
			t.Errorf("parseKey(%q) = %d %d %d %v", key, gotID, ix, size, ok)
		}
	}
	for _, key := range []string{"", "chunks/", "chunks/0/0/1_2", "chunks/0/0/1_2_3_4", "chunks/9/9/1_0_1", "other/0/0/1_0_1", "chunks/0/0/01_0_1", "chunks/0/0/1_0_-1"} {
		if _, _, _, ok := parseKey(key); ok {
			t.Errorf("parseKey(%q) accepted", key)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	f.Add("chunks/0/0/1_0_1000")
	f.Add("chunks/1/1234/1234567_2_4194304")
	f.Add("chunks/0/0/1_0_")
	f.Fuzz(func(t *testing.T, key string) {
		id, ix, size, ok := parseKey(key)
		if ok && blockKey(id, ix, size) != key {
			t.Fatalf("parseKey(%q) = %d %d %d, which names another key", key, id, ix, size)
		}
	})
}

func FuzzCheckView(f *testing.F) {
	f.Add([]byte{1, 10, 0, 10, 0, 2, 10, 0, 5, 20})
	f.Fuzz(func(t *testing.T, b []byte) {
		var slices []*pb.Slice
		for len(b) >= 5 {
			slices = append(slices, &pb.Slice{Id: uint64(b[0] % 4), Size: uint32(b[1]) * 40, Off: uint32(b[2]) * 40, Len: uint32(b[3]) * 40, Pos: uint32(b[4]) * 40})
			b = b[5:]
		}
		if checkView(&pb.ChunkView{Slices: slices}, 4096) != nil {
			return
		}
		// An accepted view must plan without panicking and cover the range.
		pcs := plan(nil, slices, 0, 4096)
		total := 0
		for _, p := range pcs {
			total += p.n
			if p.id != 0 && p.soff+p.n > p.size {
				t.Fatalf("piece reads past its slice: %+v", p)
			}
		}
		if total != 4096 {
			t.Fatalf("plan covers %d bytes", total)
		}
	})
}
