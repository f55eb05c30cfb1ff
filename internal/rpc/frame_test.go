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
	if r := o.appendReply(1, 1, 0, 0, []byte("a")); r != mustWrite {
		t.Fatalf("first append to an idle outbound: %v, want mustWrite", r)
	}
	// The first appender owns the write side until it lets go: later
	// appends leave their frames to it.
	if r := o.appendCall(2, 1, 0, nil, &Cred{UID: 5}, []byte("b")); r != queued {
		t.Fatalf("append while owned: %v, want queued", r)
	}
	if r := o.appendReply(3, 1, 0, 0, nil); r != queued {
		t.Fatalf("append while owned: %v, want queued", r)
	}
	buf, frames := o.take()
	if frames != 3 {
		t.Fatalf("took %d frames, want 3", frames)
	}
	checkIDs(t, buf, 1, 2, 3)
	// A frame appended during the owner's write is still the owner's.
	if r := o.appendReply(4, 1, 0, 0, nil); r != queued {
		t.Fatalf("append during a write: %v, want queued", r)
	}
	o.written(buf)
	if !o.settle() {
		t.Fatal("settle let go of the write side with a frame pending")
	}
	buf, frames = o.take()
	if frames != 1 {
		t.Fatalf("took %d frames, want 1", frames)
	}
	checkIDs(t, buf, 4)
	o.written(buf)
	if o.settle() {
		t.Fatal("settle kept the write side with nothing pending")
	}
	// Let go: the next appender owns it, and take on an empty outbound
	// lets go again.
	if r := o.appendReply(5, 1, 0, 0, nil); r != mustWrite {
		t.Fatalf("append after the owner let go: %v, want mustWrite", r)
	}
	if buf, _ := o.take(); buf == nil {
		t.Fatal("take returned nothing with a frame pending")
	}
	if buf, frames := o.take(); buf != nil || frames != 0 {
		t.Fatalf("second take got %d bytes, %d frames", len(buf), frames)
	}
	if r := o.appendReply(6, 1, 0, 0, nil); r != mustWrite {
		t.Fatalf("append after an empty take: %v, want mustWrite", r)
	}
	o.close()
	if r := o.appendReply(7, 1, 0, 0, nil); r != dropped {
		t.Fatalf("append to a closed outbound: %v, want dropped", r)
	}
}

// With two holders, the frames wait for the last to let go.
func TestOutboundNestedHolds(t *testing.T) {
	o := newOutbound()
	o.hold()
	o.hold()
	if r := o.appendReply(1, 1, 0, 0, nil); r != queued {
		t.Fatalf("append while held twice: %v, want queued", r)
	}
	if o.unhold() {
		t.Fatal("the first of two holders to let go became the owner")
	}
	if r := o.appendReply(2, 1, 0, 0, nil); r != queued {
		t.Fatalf("append while still held: %v, want queued", r)
	}
	if !o.unhold() {
		t.Fatal("the last holder to let go did not become the owner")
	}
	buf, frames := o.take()
	if frames != 2 {
		t.Fatalf("took %d frames, want 2", frames)
	}
	checkIDs(t, buf, 1, 2)
}

func TestOutboundHold(t *testing.T) {
	o := newOutbound()
	if o.unhold() {
		t.Fatal("unhold with nothing pending made the caller the owner")
	}
	o.hold()
	for id := range uint64(3) {
		if r := o.appendReply(id, 1, 0, 0, nil); r != queued {
			t.Fatalf("append while held: %v, want queued", r)
		}
	}
	if !o.unhold() {
		t.Fatal("unhold with frames pending and nobody writing did not make the caller the owner")
	}
	buf, frames := o.take()
	if frames != 3 {
		t.Fatalf("took %d frames, want 3", frames)
	}
	checkIDs(t, buf, 0, 1, 2)

	// Held while another goroutine writes: the writer keeps what the
	// holder leaves.
	o.hold()
	if r := o.appendReply(3, 1, 0, 0, nil); r != queued {
		t.Fatalf("append while held and owned: %v, want queued", r)
	}
	if o.unhold() {
		t.Fatal("unhold made the caller the owner while another goroutine writes")
	}
	if !o.settle() {
		t.Fatal("the owner let go with a held frame pending")
	}
	if _, frames := o.take(); frames != 1 {
		t.Fatalf("took %d frames, want 1", frames)
	}
	select {
	case <-o.ready:
		t.Fatal("a token was sent without a hand-off")
	default:
	}
	o.handOff()
	select {
	case <-o.ready:
	default:
		t.Fatal("hand-off sent no token")
	}
}

// checkIDs checks that buf holds frames with the given call ids, in order.
func checkIDs(t *testing.T, buf []byte, ids ...uint64) {
	t.Helper()
	fr := newFrameReader(bytes.NewReader(buf), DefaultMaxFrame)
	for _, id := range ids {
		b, _, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		if f, err := decodeFrame(b); err != nil || f.id != id {
			t.Fatalf("frame %+v, %v; want id %d", f, err, id)
		}
	}
	if _, _, err := fr.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the frames: %v, want EOF", err)
	}
}

func TestFrameReaderBuffered(t *testing.T) {
	one := appendReply(nil, 1, 1, 0, 0, []byte("abc"))
	two := appendReply(nil, 2, 1, 0, 0, nil)
	stream := append(append([]byte(nil), one...), two...)
	for cut := range len(stream) + 1 {
		// The first Read hands over the stream's first cut bytes.
		fr := newFrameReader(&chunks{parts: [][]byte{stream[:cut], stream[cut:]}}, DefaultMaxFrame)
		if fr.buffered() {
			t.Fatalf("cut %d: buffered before anything was read", cut)
		}
		if cut < len(one) {
			continue
		}
		if _, _, err := fr.next(); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if got, want := fr.buffered(), cut == len(stream); got != want {
			t.Fatalf("cut %d: buffered = %v, want %v", cut, got, want)
		}
	}
	// A length beyond the limit counts as not buffered.
	bad := appendReply(nil, 1, 1, 0, 0, make([]byte, 100))
	fr := newFrameReader(bytes.NewReader(append(append([]byte(nil), two...), bad...)), 64)
	if _, _, err := fr.next(); err != nil {
		t.Fatal(err)
	}
	if fr.buffered() {
		t.Fatal("a frame over the limit counts as buffered")
	}
}

// chunks is a reader that returns its parts one Read at a time.
type chunks struct{ parts [][]byte }

func (c *chunks) Read(p []byte) (int, error) {
	for len(c.parts) > 0 && len(c.parts[0]) == 0 {
		c.parts = c.parts[1:]
	}
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	return n, nil
}
