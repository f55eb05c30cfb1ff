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
	f.Add(appendCall(nil, 3, 4, 0, &Cred{UID: 1, GID: 2, Groups: []uint32{3}}, []byte("x"))[lenSize:])
	f.Add(appendReply(nil, 3, 4, StatusInternal, 0, []byte("y"))[lenSize:])
	f.Add(appendCall(nil, 3, 4, flagCompressed, &Cred{}, []byte{1, 0, 'z'})[lenSize:])
	f.Add(appendCallFrom(nil, 3, 4, 0, &origin{client: ClientID{7}, id: 9}, &Cred{UID: 1}, []byte("x"))[lenSize:])
	f.Add(appendCallFrom(nil, 3, 4, 0, &origin{client: ClientID{7}, id: 9, token: []byte("tok")}, &Cred{UID: 1}, []byte("x"))[lenSize:])
	f.Add(appendReply(nil, 3, 4, StatusOK, flagCompressed, []byte{1, 0, 'z'})[lenSize:])
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
				var from *origin
				if fr.flags&flagForwarded != 0 {
					from = &origin{client: fr.origin, id: fr.originID, token: fr.token}
				}
				again = appendCallFrom(nil, fr.id, fr.method, fr.flags&^(flagForwarded|flagToken), from, &fr.cred, fr.payload)
			case kindReply:
				again = appendReply(nil, fr.id, fr.method, fr.status, fr.flags, fr.payload)
			case kindHello, kindWelcome:
				if fr.flags != 0 {
					t.Fatalf("decoded a %d frame with flags %#x", fr.kind, fr.flags)
				}
				again = append(appendHeader(nil, headerSize+len(fr.payload), fr.kind, 0, 0, 0, 0), fr.payload...)
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
// and what decodes encodes back to the same bytes, in either version.
func FuzzDecodeHello(f *testing.F) {
	f.Add(appendHello(nil, &hello{version: protocolVersion, client: ClientID{1}, secret: []byte("s"), codecs: AllCodecs})[lenSize:])
	f.Add(appendHello(nil, &hello{version: 1, client: ClientID{1}, secret: []byte("s")})[lenSize:])
	f.Add(appendHello(nil, &hello{version: 3, client: ClientID{1}, secret: []byte("s"), codecs: AllCodecs})[lenSize:])
	f.Add(appendHello(nil, &hello{version: protocolVersion, client: ClientID{2}, codecs: AllCodecs,
		token: []byte("cnpy.a.0000000000000000000000000000000000000000000000000000000000000000")})[lenSize:])
	f.Add(appendWelcome(nil, welcome{version: protocolVersion, status: StatusBadVersion})[lenSize:])
	f.Add(appendWelcome(nil, welcome{version: protocolVersion, codec: CodecZstd})[lenSize:])
	f.Add(appendWelcome(nil, welcome{version: 1})[lenSize:])
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := decodeHello(b); err == nil {
			if h.version < 2 && h.codecs != 0 {
				t.Fatalf("version %d hello with codecs %v", h.version, h.codecs)
			}
			if h.version < 4 && h.token != nil || len(h.token) > MaxToken {
				t.Fatalf("version %d hello with a token of %d bytes", h.version, len(h.token))
			}
			if spoken(h.version) {
				if again := appendHello(nil, &h)[lenSize:]; !bytes.Equal(again, b) {
					t.Fatalf("decoded %+v from %x, which encodes as %x", h, b, again)
				}
			}
		} else if !errors.Is(err, errMalformed) {
			t.Fatalf("hello error %v is not errMalformed", err)
		}
		if w, err := decodeWelcome(b); err == nil {
			if !w.withCodec() && w.codec != 0 {
				t.Fatalf("welcome %+v carries a codec it has no room for", w)
			}
			if again := appendWelcome(nil, w)[lenSize:]; !bytes.Equal(again, b) {
				t.Fatalf("decoded %+v from %x, which encodes as %x", w, b, again)
			}
		} else if !errors.Is(err, errMalformed) {
			t.Fatalf("welcome error %v is not errMalformed", err)
		}
	})
}

// FuzzDecompress checks that decompressing any bytes with any codec never
// panics, never yields more than the limit, fails only as malformed or as a
// bomb, and that what decompresses survives a round trip.
func FuzzDecompress(f *testing.F) {
	const maxFrame = 1 << 20
	z := newCompression(0, 1, maxFrame)
	text := compressible(16 << 10)
	for _, codec := range []Codec{CodecS2, CodecZstd} {
		packed, _, scratch := z.compress(codec, text)
		f.Add(uint16(codec), bytes.Clone(packed), uint32(len(text)))
		f.Add(uint16(codec), bytes.Clone(packed), uint32(len(text)-1))
		releaseScratch(scratch)
	}
	f.Add(uint16(CodecS2), append(appendUvarint(nil, 1<<32-1), 0), uint32(maxFrame))
	f.Add(uint16(CodecZstd), []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0x58, 0, 0}, uint32(maxFrame))
	f.Add(uint16(0), []byte("x"), uint32(10))
	f.Fuzz(func(t *testing.T, codec uint16, b []byte, limit uint32) {
		limit %= maxFrame + 1
		out, err := z.decompress(Codec(codec), b, int(limit))
		if err != nil {
			if !errors.Is(err, errMalformed) && !errors.Is(err, errBomb) {
				t.Fatalf("error %v is neither errMalformed nor errBomb", err)
			}
			return
		}
		if len(out) > int(limit) {
			t.Fatalf("%d bytes decompressed to %d, limit %d", len(b), len(out), limit)
		}
		packed, flags, scratch := z.compress(Codec(codec), out)
		defer releaseScratch(scratch)
		if flags == 0 {
			return // too short to compress, or incompressible
		}
		again, err := z.decompress(Codec(codec), packed, len(out))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("round trip of %d bytes: %d bytes, %v", len(out), len(again), err)
		}
	})
}
