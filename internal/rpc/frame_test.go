package rpc

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

// body strips a frame's length field, checking it first.
func body(t testing.TB, frame []byte) []byte {
	t.Helper()
	if n := le.Uint32(frame); int(n) != len(frame)-lenSize {
		t.Fatalf("length field %d, frame has %d bytes after it", n, len(frame)-lenSize)
	}
	return frame[lenSize:]
}

func TestCallRoundTrip(t *testing.T) {
	for _, cred := range []Cred{
		{},
		{UID: 1000, GID: 100, Groups: []uint32{4, 24, 27}},
		{UID: 1, GID: 1, Groups: make([]uint32, MaxGroups)},
	} {
		f, err := decodeFrame(body(t, appendCall(nil, 1<<40, 513, 0, &cred, []byte("payload"))))
		if err != nil {
			t.Fatal(err)
		}
		if f.kind != kindCall || f.id != 1<<40 || f.method != 513 || f.status != 0 ||
			f.cred.UID != cred.UID || f.cred.GID != cred.GID || !slices.Equal(f.cred.Groups, cred.Groups) ||
			string(f.payload) != "payload" {
			t.Fatalf("decoded %+v from a call with %+v", f, cred)
		}
	}
}

func TestReplyRoundTrip(t *testing.T) {
	f, err := decodeFrame(body(t, appendReply(nil, 42, 7, StatusBusy, 0, []byte("r"))))
	if err != nil {
		t.Fatal(err)
	}
	if f.kind != kindReply || f.id != 42 || f.method != 7 || f.status != StatusBusy || string(f.payload) != "r" {
		t.Fatalf("decoded %+v", f)
	}
}

func TestHandshakeRoundTrip(t *testing.T) {
	in := hello{version: protocolVersion, client: ClientID{9, 8, 7}, secret: []byte("s3cret")}
	h, err := decodeHello(body(t, appendHello(nil, &in)))
	if err != nil {
		t.Fatal(err)
	}
	if h.version != in.version || h.client != in.client || string(h.secret) != "s3cret" {
		t.Fatalf("decoded %+v, want %+v", h, in)
	}
	w, err := decodeWelcome(body(t, appendWelcome(nil, welcome{version: 1, status: StatusUnauthenticated})))
	if err != nil {
		t.Fatal(err)
	}
	if w.version != 1 || w.status != StatusUnauthenticated {
		t.Fatalf("decoded %+v", w)
	}
	if _, err := decodeHello(body(t, appendWelcome(nil, welcome{}))); !errors.Is(err, errMalformed) {
		t.Fatalf("welcome decoded as a hello: %v", err)
	}
	if _, err := decodeWelcome(body(t, appendHello(nil, &in))); !errors.Is(err, errMalformed) {
		t.Fatalf("hello decoded as a welcome: %v", err)
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	call := body(t, appendCall(nil, 1, 1, 0, &Cred{Groups: []uint32{1, 2}}, nil))
	with := func(b []byte, i int, v byte) []byte {
		b = slices.Clone(b)
		b[i] = v
		return b
	}
	for name, b := range map[string][]byte{
		"empty":             nil,
		"short header":      call[:headerSize-1],
		"kind 0":            with(call, 0, 0),
		"kind 5":            with(call, 0, 5),
		"unknown flag":      with(call, 1, 2),
		"compressed hello":  with(body(t, appendHello(nil, &hello{version: 2})), 1, flagCompressed),
		"call with status":  with(call, 12, 1),
		"call without cred": call[:headerSize+credSize-1],
		"groups cut short":  call[:len(call)-1],
		"too many groups":   with(call, headerSize+8, MaxGroups+1),
		"hello with id":     with(body(t, appendHello(nil, &hello{version: 1})), 4, 1),
		"welcome w/ method": with(body(t, appendWelcome(nil, welcome{})), 2, 1),
	} {
		if _, err := decodeFrame(b); !errors.Is(err, errMalformed) {
			t.Errorf("%s: err = %v, want errMalformed", name, err)
		}
	}
}

func TestFrameReader(t *testing.T) {
	big := bytes.Repeat([]byte{0xab}, readBufSize+1)
	var stream []byte
	stream = appendReply(stream, 1, 1, 0, 0, []byte("small"))
	stream = appendReply(stream, 2, 1, 0, 0, big)
	stream = appendReply(stream, 3, 1, 0, 0, nil)

	fr := newFrameReader(bytes.NewReader(stream), DefaultMaxFrame)
	for i, want := range []struct {
		id      uint64
		payload []byte
		owned   bool
	}{{1, []byte("small"), false}, {2, big, true}, {3, nil, false}} {
		b, owned, err := fr.next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		f, err := decodeFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		if f.id != want.id || !bytes.Equal(f.payload, want.payload) || owned != want.owned {
			t.Fatalf("frame %d: id %d, %d bytes, owned %v", i, f.id, len(f.payload), owned)
		}
	}
	if _, _, err := fr.next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}

	for name, tc := range map[string]struct {
		stream []byte
		want   error
	}{
		"too large":   {le.AppendUint32(nil, 1025), ErrTooLarge},
		"too short":   {le.AppendUint32(nil, headerSize-1), errMalformed},
		"cut length":  {[]byte{1, 0}, io.ErrUnexpectedEOF},
		"cut body":    {appendReply(nil, 1, 1, 0, 0, []byte("abc"))[:lenSize+headerSize], io.ErrUnexpectedEOF},
		"cut big one": {appendReply(nil, 1, 1, 0, 0, big)[:lenSize+headerSize+10], io.ErrUnexpectedEOF},
	} {
		max := 1024
		if name == "cut big one" {
			max = DefaultMaxFrame
		}
		fr := newFrameReader(bytes.NewReader(tc.stream), max)
		if _, _, err := fr.next(); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
}

func TestOutboundCoalesces(t *testing.T) {
	o := newOutbound()
	o.appendReply(1, 1, 0, 0, []byte("a"))
	o.appendCall(2, 1, 0, &Cred{UID: 5}, []byte("b"))
	o.appendReply(3, 1, 0, 0, nil)
	select {
	case <-o.ready:
	default:
		t.Fatal("appending to an empty buffer did not wake the writer")
	}
	buf, frames := o.take(nil)
	if frames != 3 {
		t.Fatalf("took %d frames, want 3", frames)
	}
	fr := newFrameReader(bytes.NewReader(buf), DefaultMaxFrame)
	for _, id := range []uint64{1, 2, 3} {
		b, _, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		if f, err := decodeFrame(b); err != nil || f.id != id {
			t.Fatalf("frame %+v, %v; want id %d", f, err, id)
		}
	}
	if buf, frames := o.take(buf); len(buf) != 0 || frames != 0 {
		t.Fatalf("second take got %d bytes, %d frames", len(buf), frames)
	}
	o.close()
	if o.appendReply(4, 1, 0, 0, nil) {
		t.Fatal("append to a closed outbound succeeded")
	}
}
