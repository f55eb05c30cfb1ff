package rpc

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzDecodeFrame checks that any frame body decodes without panicking,
// that a body that decodes is exactly what the encoder makes of the decoded
// frame, and that framing any bytes as a stream ends.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(appendCall(nil, 3, 4, &Cred{UID: 1, GID: 2, Groups: []uint32{3}}, []byte("x"))[lenSize:])
	f.Add(appendReply(nil, 3, 4, StatusInternal, []byte("y"))[lenSize:])
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeFrame(b)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v is not errMalformed", err)
			}
		} else {
			var again []byte
			switch fr.kind {
			case kindCall:
				again = appendCall(nil, fr.id, fr.method, &fr.cred, fr.payload)
			case kindReply:
				again = appendReply(nil, fr.id, fr.method, fr.status, fr.payload)
			case kindHello, kindWelcome:
				again = append(appendHeader(nil, headerSize+len(fr.payload), fr.kind, 0, 0, 0), fr.payload...)
			default:
				t.Fatalf("decoded unknown kind %d", fr.kind)
			}
			if !bytes.Equal(again[lenSize:], b) {
				t.Fatalf("decoded %+v from %x, which encodes as %x", fr, b, again[lenSize:])
			}
		}

		// The body behind a length field reads back whole.
		stream := append(le.AppendUint32(nil, uint32(len(b))), b...)
		whole := newFrameReader(bytes.NewReader(stream), DefaultMaxFrame)
		got, _, err := whole.next()
		if len(b) >= headerSize && (err != nil || !bytes.Equal(got, b)) {
			t.Fatalf("framed body read back as %x, %v", got, err)
		}

		// The bytes as a stream of frames: every read ends in a frame or
		// an error, and the stream runs out.
		r := newFrameReader(bytes.NewReader(b), 1<<10)
		for range len(b) + 1 {
			body, _, err := r.next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) &&
					!errors.Is(err, ErrTooLarge) && !errors.Is(err, errMalformed) {
					t.Fatalf("stream error %v", err)
				}
				return
			}
			decodeFrame(body)
		}
		t.Fatalf("%d bytes read as more than %d frames", len(b), len(b))
	})
}

// FuzzDecodeHello checks the handshake decoders the same way: no panics,
// and what decodes encodes back to the same bytes.
func FuzzDecodeHello(f *testing.F) {
	f.Add(appendHello(nil, &hello{version: protocolVersion, client: ClientID{1}, secret: []byte("s")})[lenSize:])
	f.Add(appendWelcome(nil, welcome{version: protocolVersion, status: StatusBadVersion})[lenSize:])
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := decodeHello(b); err == nil {
			if h.version == protocolVersion {
				if again := appendHello(nil, &h)[lenSize:]; !bytes.Equal(again, b) {
					t.Fatalf("decoded %+v from %x, which encodes as %x", h, b, again)
				}
			}
		} else if !errors.Is(err, errMalformed) {
			t.Fatalf("hello error %v is not errMalformed", err)
		}
		if w, err := decodeWelcome(b); err == nil {
			if again := appendWelcome(nil, w)[lenSize:]; !bytes.Equal(again, b) {
				t.Fatalf("decoded %+v from %x, which encodes as %x", w, b, again)
			}
		} else if !errors.Is(err, errMalformed) {
			t.Fatalf("welcome error %v is not errMalformed", err)
		}
	})
}
