package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/canopyfs/canopy/internal/vfs"
)

// TestTCPGroup runs three replicas over TCP on 127.0.0.1, then adds a
// fourth that catches up from a snapshot sent in chunks over TCP.
func TestTCPGroup(t *testing.T) {
	ids := []uint64{1, 2, 3, 4}
	lns := map[uint64]net.Listener{}
	addrs := map[uint64]string{}
	for _, id := range ids {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[id], addrs[id] = ln, ln.Addr().String()
	}
	nodes := map[uint64]*Node{}
	sms := map[uint64]*kv{}
	start := func(id uint64, peers []uint64) {
		tr := NewTCPTransport(id, addrs, quiet)
		sm := newKV()
		n, err := Start(Config{ID: id, FS: vfs.NewMem(), Dir: "r", Peers: peers, StateMachine: sm, Transport: tr,
			TickInterval: testTick, ElectionTicks: testElection, SnapshotEntries: 100, CatchUpEntries: 10,
			ChunkSize: 1 << 10, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		tr.Serve(lns[id], n)
		nodes[id], sms[id] = n, sm
		t.Cleanup(func() {
			n.Stop()
			tr.Close()
		})
	}
	for _, id := range ids[:3] {
		start(id, ids[:3])
	}
	leader := func() uint64 {
		var lead uint64
		waitFor(t, 10*time.Second, "a leader", func() bool {
			st, err := nodes[1].Status(context.Background())
			if err != nil || st.Leader == 0 {
				return false
			}
			lead = st.Leader
			st, err = nodes[lead].Status(context.Background())
			return err == nil && st.Role == "StateLeader"
		})
		return lead
	}
	put := func(k, v string) uint64 {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			idx, err := nodes[leader()].Propose(ctx, []byte(k+"="+v))
			cancel()
			if err == nil {
				return idx.(uint64)
			}
			if !isRetryable(err) {
				t.Fatalf("put: %v", err)
			}
		}
	}
	var last uint64
	for i := range 250 {
		last = put(fmt.Sprint("k", i), fmt.Sprint(i))
	}
	start(4, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nodes[leader()].AddLearner(ctx, 4); err != nil {
		t.Fatalf("AddLearner: %v", err)
	}
	last = put("end", "1")
	for _, id := range ids {
		waitFor(t, 10*time.Second, fmt.Sprintf("replica %d to apply %d", id, last), func() bool {
			st, err := nodes[id].Status(context.Background())
			return err == nil && st.Applied >= last
		})
		if v, _ := sms[id].get("k123"); v != "123" {
			t.Fatalf("replica %d: k123 = %q", id, v)
		}
	}
	if st, _ := nodes[4].Status(context.Background()); st.SnapshotIndex == 0 {
		t.Fatalf("replica 4 caught up without a snapshot: %+v", st)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	m := pb.Message{Type: pb.MsgApp, From: 1, To: 2, Term: 3, Index: 4, LogTerm: 3, Commit: 4,
		Entries: []pb.Entry{{Term: 3, Index: 5, Data: []byte("hello")}}}
	b, err := appendMessageFrame(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	c := Chunk{Msg: pb.Message{Type: pb.MsgSnap, From: 1, To: 2, Term: 3,
		Snapshot: &pb.Snapshot{Metadata: pb.SnapshotMetadata{Index: 9, Term: 2}}}, Offset: 77, Data: []byte("chunk"), Last: true}
	if b, err = appendChunkFrame(b, c); err != nil {
		t.Fatal(err)
	}
	fr := &frameReader{r: bytes.NewReader(b)}
	kind, got, _, err := fr.next()
	if err != nil || kind != kindMessage || got.Index != 4 || string(got.Entries[0].Data) != "hello" {
		t.Fatalf("message frame: kind %d %+v %v", kind, got, err)
	}
	kind, _, gc, err := fr.next()
	if err != nil || kind != kindChunk || gc.Offset != 77 || !gc.Last || string(gc.Data) != "chunk" ||
		gc.Msg.Snapshot.Metadata.Index != 9 {
		t.Fatalf("chunk frame: kind %d %+v %v", kind, gc, err)
	}
	if _, _, _, err := fr.next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestFrameErrors(t *testing.T) {
	frame := func(length uint32, kind byte, body []byte) []byte {
		b := binary.LittleEndian.AppendUint32(nil, length)
		return append(append(b, kind), body...)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"oversize", frame(MaxFrameSize+1, kindMessage, nil), ErrFrameTooLarge},
		{"zero length", frame(0, kindMessage, nil), ErrMalformedFrame},
		{"unknown kind", frame(2, 9, []byte{0}), ErrMalformedFrame},
		{"bad message", frame(4, kindMessage, []byte{0xff, 0xff, 0xff}), ErrMalformedFrame},
		{"short chunk", frame(3, kindChunk, []byte{1, 0}), ErrMalformedFrame},
		{"chunk of a non-snapshot", frame(14, kindChunk, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), ErrMalformedFrame},
		{"cut short", frame(100, kindMessage, []byte{1, 2, 3}), io.ErrUnexpectedEOF},
	} {
		fr := &frameReader{r: bytes.NewReader(tc.in)}
		if _, _, _, err := fr.next(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	big := pb.Message{Type: pb.MsgApp, To: 2, Entries: []pb.Entry{{Data: make([]byte, MaxFrameSize)}}}
	if _, err := appendMessageFrame(nil, &big); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("encoding an oversize message: %v, want ErrFrameTooLarge", err)
	}
}

// TestTCPBadPeerInput sends garbage and forbidden messages to a serving
// transport: each closes its connection and the replica keeps working.
func TestTCPBadPeerInput(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTCPTransport(1, nil, quiet)
	n, err := Start(Config{ID: 1, FS: vfs.NewMem(), Dir: "r", Peers: []uint64{1}, StateMachine: newKV(),
		Transport: tr, TickInterval: testTick, ElectionTicks: testElection, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	tr.Serve(ln, n)
	defer func() {
		n.Stop()
		tr.Close()
	}()
	prop := pb.Message{Type: pb.MsgProp, From: 2, To: 1, Entries: []pb.Entry{{Data: []byte("x")}}}
	propFrame, _ := appendMessageFrame(nil, &prop)
	for _, in := range [][]byte{
		{0xff, 0xff, 0xff, 0xff, 1},
		{5, 0, 0, 0, kindMessage, 0xff, 0xff, 0xff, 0xff},
		propFrame,
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(in)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("input %x: connection not closed by the replica: %v", in[:min(len(in), 8)], err)
		}
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	waitFor(t, 5*time.Second, "leadership", func() bool {
		st, err := n.Status(ctx)
		return err == nil && st.Role == "StateLeader"
	})
	if _, err := n.Propose(ctx, []byte("a=1")); err != nil {
		t.Fatalf("Propose after bad input: %v", err)
	}
}

// FuzzFrameReader feeds arbitrary bytes to the frame decoder: it must
// return errors, never panic, and what it decodes must encode back to a
// frame that decodes to the same thing.
func FuzzFrameReader(f *testing.F) {
	m := pb.Message{Type: pb.MsgApp, From: 1, To: 2, Term: 3, Entries: []pb.Entry{{Term: 3, Index: 5, Data: []byte("x")}}}
	seed, _ := appendMessageFrame(nil, &m)
	f.Add(seed)
	c := Chunk{Msg: pb.Message{Type: pb.MsgSnap, To: 2, Snapshot: &pb.Snapshot{}}, Offset: 1, Data: []byte("d")}
	seed, _ = appendChunkFrame(nil, c)
	f.Add(seed)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := &frameReader{r: bytes.NewReader(in)}
		for {
			kind, m, c, err := fr.next()
			if err != nil {
				return
			}
			var b []byte
			switch kind {
			case kindMessage:
				b, err = appendMessageFrame(nil, &m)
			case kindChunk:
				b, err = appendChunkFrame(nil, c)
			default:
				t.Fatalf("decoded kind %d", kind)
			}
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			k2, m2, c2, err := (&frameReader{r: bytes.NewReader(b)}).next()
			if err != nil || k2 != kind {
				t.Fatalf("re-decode: kind %d, %v", k2, err)
			}
			if kind == kindMessage {
				x, _ := m.Marshal()
				y, _ := m2.Marshal()
				if !bytes.Equal(x, y) {
					t.Fatal("message changed through encode and decode")
				}
			} else if c.Offset != c2.Offset || c.Last != c2.Last || !bytes.Equal(c.Data, c2.Data) {
				t.Fatal("chunk changed through encode and decode")
			}
		}
	})
}
