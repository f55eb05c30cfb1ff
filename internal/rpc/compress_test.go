package rpc

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
)

// compressible returns n bytes that compress well.
func compressible(n int) []byte {
	line := []byte("inode 1234 mode 0644 uid 1000 gid 100 size 4096 name canopy.txt\n")
	return bytes.Repeat(line, n/len(line)+1)[:n]
}

// incompressible returns n random bytes.
func incompressible(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}

// codec returns the codec of the client's current connection.
func (c *Client) codec() Codec { return c.cur.Load().codec }

// codecEcho echoes calls and reports the codec of each call's connection,
// as the server's reader sees it.
func codecEcho(codecs chan<- Codec) Handler {
	return HandlerFunc(func(c *Call) {
		select {
		case codecs <- c.conn.codec:
		default:
		}
		c.Reply(StatusOK, c.Payload)
	})
}

func TestCompressionRoundTrip(t *testing.T) {
	for _, codec := range []Codec{CodecS2, CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			checkGoroutines(t)
			reg := prometheus.NewRegistry()
			codecs := make(chan Codec, 1)
			srv := startServer(t, codecEcho(codecs), ServerConfig{Metrics: reg})
			cl := dial(t, srv.addr, ClientConfig{Codecs: codec})
			if got := cl.codec(); got != codec {
				t.Fatalf("client negotiated %v, want %v", got, codec)
			}

			// 1 MiB of text crosses in far fewer bytes, both ways.
			req := compressible(1 << 20)
			if _, reply, err := cl.Call(testCtx(t), 1, Cred{UID: 7, Groups: []uint32{1, 2}}, req); err != nil || !bytes.Equal(reply, req) {
				t.Fatalf("call: %d bytes back, %v", len(reply), err)
			}
			if got := recv(t, codecs); got != codec {
				t.Fatalf("server connection uses %v, want %v", got, codec)
			}
			waitFor(t, "the reply to be counted", func() bool {
				return metricSum(t, reg, "canopy_rpc_frames_per_write") == 1
			})
			read := metricValue(t, reg, "canopy_rpc_read_bytes_total")
			written := metricValue(t, reg, "canopy_rpc_written_bytes_total")
			if read > float64(len(req))/10 || written > float64(len(req))/10 {
				t.Fatalf("%d bytes each way took %v bytes in and %v out: not compressed", len(req), read, written)
			}

			// Random bytes do not compress: they go as they are, and arrive.
			rnd := incompressible(64 << 10)
			if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, rnd); err != nil || !bytes.Equal(reply, rnd) {
				t.Fatalf("call: %d bytes back, %v", len(reply), err)
			}
			waitFor(t, "the reply to be counted", func() bool {
				return metricSum(t, reg, "canopy_rpc_frames_per_write") == 2
			})
			if got := metricValue(t, reg, "canopy_rpc_read_bytes_total") - read; got < float64(len(rnd)) {
				t.Fatalf("%d random bytes arrived in %v bytes", len(rnd), got)
			}

			// Payloads at the threshold go as they are.
			small := compressible(DefaultCompressAbove)
			read = metricValue(t, reg, "canopy_rpc_read_bytes_total")
			if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, small); err != nil || !bytes.Equal(reply, small) {
				t.Fatalf("call: %d bytes back, %v", len(reply), err)
			}
			if got := metricValue(t, reg, "canopy_rpc_read_bytes_total") - read; got != float64(len(appendCall(nil, 0, 0, 0, &Cred{}, small))) {
				t.Fatalf("a %d-byte payload took %v bytes: compressed at the threshold", len(small), got)
			}
		})
	}
}

func TestCompressionNegotiation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server ServerConfig
		client ClientConfig
		want   Codec
	}{
		{"defaults pick s2", ServerConfig{}, ClientConfig{}, CodecS2},
		{"server zstd only", ServerConfig{Codecs: CodecZstd}, ClientConfig{}, CodecZstd},
		{"nothing in common", ServerConfig{Codecs: CodecS2}, ClientConfig{Codecs: CodecZstd}, 0},
		{"server off", ServerConfig{CompressAbove: -1}, ClientConfig{}, 0},
		{"client off", ServerConfig{}, ClientConfig{CompressAbove: -1}, 0},
		{"unknown codec bits ignored", ServerConfig{Codecs: 0x80 | CodecZstd}, ClientConfig{Codecs: 0x80 | CodecZstd}, CodecZstd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			reg := prometheus.NewRegistry()
			tc.server.Metrics = reg
			codecs := make(chan Codec, 1)
			srv := startServer(t, codecEcho(codecs), tc.server)
			cl := dial(t, srv.addr, tc.client)
			if got := cl.codec(); got != tc.want {
				t.Fatalf("client negotiated %v, want %v", got, tc.want)
			}
			req := compressible(256 << 10)
			if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, req); err != nil || !bytes.Equal(reply, req) {
				t.Fatalf("call: %d bytes back, %v", len(reply), err)
			}
			if got := recv(t, codecs); got != tc.want {
				t.Fatalf("server negotiated %v, want %v", got, tc.want)
			}
			if tc.want == 0 {
				if got := metricValue(t, reg, "canopy_rpc_read_bytes_total"); got < float64(len(req)) {
					t.Fatalf("%d bytes arrived in %v bytes without a codec", len(req), got)
				}
			}
		})
	}
}

// A version 1 client gets a version 1 welcome and uncompressed replies.
func TestCompressionVersion1Client(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, echo, ServerConfig{})
	nc := rawConn(t, srv.addr)
	if _, err := nc.Write(appendHello(nil, &hello{version: 1, client: ClientID{1}})); err != nil {
		t.Fatal(err)
	}
	fr := newFrameReader(nc, DefaultMaxFrame)
	body, _, err := fr.next()
	if err != nil {
		t.Fatal(err)
	}
	if len(body) != headerSize+welcomeSize {
		t.Fatalf("welcome of %d bytes to a version 1 client, want %d", len(body), headerSize+welcomeSize)
	}
	if w, err := decodeWelcome(body); err != nil || w.version != 1 || w.status != StatusOK || w.codec != 0 {
		t.Fatalf("welcome %+v, %v; want version 1 accepted", w, err)
	}
	req := compressible(256 << 10)
	if _, err := nc.Write(appendCall(nil, 5, 1, 0, &Cred{}, req)); err != nil {
		t.Fatal(err)
	}
	body, _, err = fr.next()
	if err != nil {
		t.Fatal(err)
	}
	f, err := decodeFrame(body)
	if err != nil || f.id != 5 || f.flags != 0 || !bytes.Equal(f.payload, req) {
		t.Fatalf("reply id %d, flags %#x, %d bytes, %v; want the payload uncompressed", f.id, f.flags, len(f.payload), err)
	}

	// A compressed call is malformed on a connection without a codec.
	if _, err := nc.Write(appendCall(nil, 6, 1, flagCompressed, &Cred{}, s2.Encode(nil, req))); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, nc)
}

// v1Server is a server that speaks only version 1, as released before
// compression: it refuses any other version and closes a connection that
// sends a flag.
type v1Server struct {
	ln       net.Listener
	accepted atomic.Int32
	wg       sync.WaitGroup
}

func startV1Server(t *testing.T) *v1Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &v1Server{ln: ln}
	var mu sync.Mutex
	var conns []net.Conn
	s.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			s.wg.Go(func() { s.serve(nc) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *v1Server) serve(nc net.Conn) {
	defer nc.Close()
	fr := newFrameReader(nc, maxHelloFrame)
	body, _, err := fr.next()
	if err != nil {
		return
	}
	b := body[headerSize:]
	if len(b) < 6 || string(b[:4]) != helloMagic || le.Uint16(b[4:]) != 1 {
		nc.Write(appendWelcome(nil, welcome{version: 1, status: StatusBadVersion}))
		return
	}
	nc.Write(appendWelcome(nil, welcome{version: 1}))
	fr.max = DefaultMaxFrame
	for {
		body, _, err := fr.next()
		if err != nil {
			return
		}
		f, err := decodeFrame(body)
		if err != nil || f.flags != 0 {
			return
		}
		if _, err := nc.Write(appendReply(nil, f.id, f.method, StatusOK, 0, f.payload)); err != nil {
			return
		}
	}
}

// A client meeting a version 1 server dials again speaking version 1, and
// sends its calls uncompressed.
func TestCompressionVersion1Server(t *testing.T) {
	checkGoroutines(t)
	old := startV1Server(t)
	cl := dial(t, old.ln.Addr().String(), ClientConfig{})
	if got := cl.codec(); got != 0 {
		t.Fatalf("codec %v with a version 1 server", got)
	}
	if n := old.accepted.Load(); n != 2 {
		t.Fatalf("old server accepted %d connections, want 2: one refused, one in version 1", n)
	}
	req := compressible(256 << 10)
	if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, req); err != nil || !bytes.Equal(reply, req) {
		t.Fatalf("call: %d bytes back, %v", len(reply), err)
	}
}

// A compressed payload that would expand beyond MaxFrame closes the
// connection unserved, and the server carries on.
func TestDecompressionBomb(t *testing.T) {
	const maxFrame = 64 << 10
	zeros := make([]byte, 16<<20)
	enc, err := zstdEncoder()
	if err != nil {
		t.Fatal(err)
	}
	// An S2 block that claims to hold 4 GiB - 1.
	liar := append(appendUvarint(nil, 1<<32-1), 0)
	for _, tc := range []struct {
		name    string
		codec   Codec
		payload []byte
	}{
		{"s2 zeros", CodecS2, s2.Encode(nil, zeros)},
		{"s2 lying length", CodecS2, liar},
		{"zstd zeros", CodecZstd, enc.EncodeAll(zeros, nil)},
		{"zstd zeros, no content size", CodecZstd, zstdStream(t, zeros)},
		{"s2 just over", CodecS2, s2.Encode(nil, zeros[:maxFrame-headerSize-credSize+1])},
		{"zstd just over", CodecZstd, enc.EncodeAll(zeros[:maxFrame-headerSize-credSize+1], nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			var served atomic.Int32
			srv := startServer(t, HandlerFunc(func(c *Call) { served.Add(1); c.Reply(StatusOK, nil) }),
				ServerConfig{MaxFrame: maxFrame})
			nc := rawConn(t, srv.addr)
			if w := rawHandshake(t, nc, hello{version: protocolVersion, codecs: tc.codec}); w.codec != tc.codec {
				t.Fatalf("welcome %+v, want codec %v", w, tc.codec)
			}
			if len(tc.payload) > 4<<10 {
				t.Fatalf("bomb of %d bytes is no bomb", len(tc.payload))
			}
			if _, err := nc.Write(appendCall(nil, 1, 1, flagCompressed, &Cred{}, tc.payload)); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, nc)
			if n := served.Load(); n != 0 {
				t.Fatalf("served %d calls", n)
			}
			cl := dial(t, srv.addr, ClientConfig{MaxFrame: maxFrame, Codecs: tc.codec})
			req := compressible(maxFrame - headerSize - credSize)
			if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, req); err != nil || len(reply) != 0 {
				t.Fatalf("call at the limit after the bomb: %d bytes, %v", len(reply), err)
			}
		})
	}
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// zstdStream compresses b as a stream, whose frame header does not state
// the content size.
func zstdStream(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestDecompressLimit(t *testing.T) {
	z := newCompression(0, 0, DefaultMaxFrame)
	payload := compressible(100 << 10)
	for _, codec := range []Codec{CodecS2, CodecZstd} {
		packed, flags, scratch := z.compress(codec, payload)
		if flags != flagCompressed || len(packed) >= len(payload) {
			t.Fatalf("%v: %d bytes compressed to %d, flags %#x", codec, len(payload), len(packed), flags)
		}
		packed = bytes.Clone(packed)
		releaseScratch(scratch)
		got, err := z.decompress(codec, packed, len(payload))
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("%v: at the limit: %d bytes, %v", codec, len(got), err)
		}
		if _, err := z.decompress(codec, packed, len(payload)-1); !errors.Is(err, errBomb) {
			t.Fatalf("%v: one byte over the limit: %v, want errBomb", codec, err)
		}
		if _, err := z.decompress(codec, packed[:len(packed)/2], len(payload)); err == nil {
			t.Fatalf("%v: half a payload decompressed", codec)
		}
	}
	if _, err := z.decompress(0, []byte("x"), 10); !errors.Is(err, errMalformed) {
		t.Fatalf("decompress without a codec: %v, want errMalformed", err)
	}
}

func TestCodecChoice(t *testing.T) {
	for _, tc := range []struct{ ours, offer, want Codec }{
		{AllCodecs, AllCodecs, CodecS2},
		{AllCodecs, CodecZstd, CodecZstd},
		{CodecZstd, AllCodecs, CodecZstd},
		{CodecS2, CodecZstd, 0},
		{AllCodecs, 0, 0},
		{AllCodecs, 0xfffc, 0}, // only codecs this package does not know
	} {
		if got := tc.ours.choose(tc.offer); got != tc.want {
			t.Errorf("%v choosing from %v: %v, want %v", tc.ours, tc.offer, got, tc.want)
		}
	}
	if s := (CodecS2 | CodecZstd | 1<<5).String(); s != "s2|zstd|codec5" {
		t.Errorf("String() = %q", s)
	}
}
