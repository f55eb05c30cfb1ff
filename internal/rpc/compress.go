package rpc

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Codec names a compression algorithm for payloads. Codecs are negotiated as
// a bitmask: a client's hello offers the codecs it accepts, and the server's
// welcome names the one the connection uses, if any.
type Codec uint16

const (
	// CodecS2 is S2, a faster, Snappy-derived format
	// (github.com/klauspost/compress/s2). Servers prefer it.
	CodecS2 Codec = 1 << 0

	// CodecZstd is Zstandard at its fastest level
	// (github.com/klauspost/compress/zstd): slower than S2, smaller output.
	CodecZstd Codec = 1 << 1

	// AllCodecs is every codec this package speaks.
	AllCodecs = CodecS2 | CodecZstd

	// DefaultCompressAbove is the payload size above which payloads are
	// compressed unless configured otherwise.
	DefaultCompressAbove = 4 << 10
)

func (c Codec) String() string {
	if c == 0 {
		return "none"
	}
	var names []string
	for rest := c; rest != 0; rest &= rest - 1 {
		switch bit := rest & -rest; bit {
		case CodecS2:
			names = append(names, "s2")
		case CodecZstd:
			names = append(names, "zstd")
		default:
			names = append(names, fmt.Sprintf("codec%d", bits.TrailingZeros16(uint16(bit))))
		}
	}
	return strings.Join(names, "|")
}

// choose returns the codec a server that accepts ours picks from a client's
// offer: the lowest common bit, so S2 before Zstandard; 0 if none is common.
func (ours Codec) choose(offer Codec) Codec {
	common := ours & offer & AllCodecs
	return common & -common
}

// errBomb marks a compressed payload that would decompress beyond the limit.
var errBomb = errors.New("compressed payload expands beyond the frame limit")

// compression is one side's (a Server's or a Client's) compression settings
// and codec state, shared by all its connections.
type compression struct {
	accept Codec // codecs offered or accepted in handshakes; 0 = compression off
	above  int   // payloads longer than this are compressed

	// zstdDec decompresses Zstandard payloads, bounded by the side's
	// MaxFrame. Made on first use; safe for concurrent use.
	zstdDec func() (*zstd.Decoder, error)
}

// newCompression returns the settings for a side configured with codecs
// (0 = all), compressAbove (0 = default, negative = off) and maxFrame.
func newCompression(codecs Codec, compressAbove, maxFrame int) *compression {
	z := &compression{accept: codecs & AllCodecs, above: compressAbove}
	if codecs == 0 {
		z.accept = AllCodecs
	}
	switch {
	case compressAbove == 0:
		z.above = DefaultCompressAbove
	case compressAbove < 0:
		z.accept = 0
	}
	z.zstdDec = sync.OnceValues(func() (*zstd.Decoder, error) {
		// DecodeAll on a decoder starts no goroutine, so it needs no Close.
		return zstd.NewReader(nil,
			zstd.WithDecoderMaxMemory(uint64(maxFrame)),
			zstd.WithDecoderMaxWindow(uint64(min(max(maxFrame, zstd.MinWindowSize), zstd.MaxWindowSize))))
	})
	return z
}

// zstdEncoder compresses for every side: its settings do not depend on any
// configuration. EncodeAll starts no goroutine and is safe for concurrent
// use.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false)) // TCP (and TLS) already protect the bytes
})

// scratch buffers hold compressed payloads between compressing and
// appending them to a connection's output.
var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledScratch is the largest scratch buffer put back in the pool.
const maxPooledScratch = 1 << 20

// compress returns payload as it should be sent with codec: compressed, with
// flagCompressed, when the payload is longer than the threshold and
// compressing it makes it smaller; as it is otherwise. When scratch is not
// nil, out lives in it and the caller hands it back with releaseScratch once
// out has been copied.
func (z *compression) compress(codec Codec, payload []byte) (out []byte, flags uint8, scratch *[]byte) {
	if codec == 0 || len(payload) <= z.above {
		return payload, 0, nil
	}
	scratch = scratchPool.Get().(*[]byte)
	switch codec {
	case CodecS2:
		out = s2.Encode((*scratch)[:cap(*scratch)], payload)
	case CodecZstd:
		enc, err := zstdEncoder()
		if err != nil {
			scratchPool.Put(scratch)
			return payload, 0, nil
		}
		out = enc.EncodeAll(payload, (*scratch)[:0])
	default:
		scratchPool.Put(scratch)
		return payload, 0, nil
	}
	*scratch = out
	if len(out) >= len(payload) {
		releaseScratch(scratch)
		return payload, 0, nil
	}
	return out, flagCompressed, scratch
}

// releaseScratch returns a buffer from compress to the pool.
func releaseScratch(scratch *[]byte) {
	if scratch == nil {
		return
	}
	if cap(*scratch) > maxPooledScratch {
		*scratch = nil
	}
	*scratch = (*scratch)[:0]
	scratchPool.Put(scratch)
}

// decompress returns the payload src compressed with codec, in a new slice,
// failing with errBomb rather than producing more than limit bytes and
// with errMalformed if src is not valid.
func (z *compression) decompress(codec Codec, src []byte, limit int) ([]byte, error) {
	switch codec {
	case CodecS2:
		n, err := s2.DecodedLen(src)
		if err != nil {
			return nil, fmt.Errorf("%w: s2 payload: %v", errMalformed, err)
		}
		if n > limit {
			return nil, fmt.Errorf("%w: s2 payload of %d bytes, limit %d", errBomb, n, limit)
		}
		out, err := s2.Decode(make([]byte, n), src)
		if err != nil {
			return nil, fmt.Errorf("%w: s2 payload: %v", errMalformed, err)
		}
		return out, nil
	case CodecZstd:
		dec, err := z.zstdDec()
		if err != nil {
			return nil, fmt.Errorf("zstd decoder: %w", err)
		}
		out, err := dec.DecodeAll(src, nil)
		switch {
		case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded),
			err == nil && len(out) > limit:
			return nil, fmt.Errorf("%w: zstd payload beyond %d bytes", errBomb, limit)
		case err != nil:
			return nil, fmt.Errorf("%w: zstd payload: %v", errMalformed, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: payload compressed on a connection without a codec", errMalformed)
}
