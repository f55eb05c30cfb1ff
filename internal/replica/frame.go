package replica

import (
	"encoding/binary"
	"fmt"
	"io"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The replica protocol is a stream of frames:
//
//	length uint32 | kind byte | body (length-1 bytes)
//
// length counts the kind byte and the body, is little-endian and at most
// MaxFrameSize. A kindMessage body is one marshaled raftpb.Message; a
// kindChunk body is
//
//	msgLen uint32 | MsgSnap (msgLen bytes) | offset uint64 | last byte | data
const (
	// MaxFrameSize bounds a frame, as the RPC layer's frames are bounded.
	MaxFrameSize = 16 << 20

	// DefaultChunkSize is the snapshot chunk size when Config.ChunkSize is
	// zero; a chunk with its header stays well inside MaxFrameSize.
	DefaultChunkSize = 1 << 20

	kindMessage = 1
	kindChunk   = 2

	frameHeaderSize = 5
)

// appendFrameHeader appends the header of a frame of kind with a body of
// n bytes.
func appendFrameHeader(b []byte, kind byte, n int) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(n+1))
	return append(b, kind)
}

// appendMessageFrame appends m as one frame.
func appendMessageFrame(b []byte, m *pb.Message) ([]byte, error) {
	n := m.Size()
	if n+1 > MaxFrameSize {
		return b, fmt.Errorf("message of %d bytes to %d: %w", n, m.To, ErrFrameTooLarge)
	}
	b = appendFrameHeader(b, kindMessage, n)
	start := len(b)
	b = append(b, make([]byte, n)...)
	if _, err := m.MarshalTo(b[start:]); err != nil {
		return b[:start-frameHeaderSize], fmt.Errorf("marshal message: %w", err)
	}
	return b, nil
}

// encodeChunk appends the body of a chunk frame.
func encodeChunk(b []byte, c Chunk) []byte {
	msg, _ := c.Msg.Marshal() // a MsgSnap without data: cannot fail
	b = binary.LittleEndian.AppendUint32(b, uint32(len(msg)))
	b = append(b, msg...)
	b = binary.LittleEndian.AppendUint64(b, c.Offset)
	last := byte(0)
	if c.Last {
		last = 1
	}
	b = append(b, last)
	return append(b, c.Data...)
}

// appendChunkFrame appends c as one frame.
func appendChunkFrame(b []byte, c Chunk) ([]byte, error) {
	body := encodeChunk(nil, c)
	if len(body)+1 > MaxFrameSize {
		return b, fmt.Errorf("chunk of %d bytes: %w", len(body), ErrFrameTooLarge)
	}
	b = appendFrameHeader(b, kindChunk, len(body))
	return append(b, body...), nil
}

// decodeChunk decodes the body of a chunk frame. Data aliases b.
func decodeChunk(b []byte) (Chunk, error) {
	if len(b) < 4 {
		return Chunk{}, fmt.Errorf("chunk of %d bytes: %w", len(b), ErrMalformedFrame)
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) || len(b)-4-int(n) < 9 {
		return Chunk{}, fmt.Errorf("chunk message of %d bytes in %d: %w", n, len(b), ErrMalformedFrame)
	}
	var c Chunk
	if err := c.Msg.Unmarshal(b[4 : 4+n]); err != nil {
		return Chunk{}, fmt.Errorf("chunk message: %v: %w", err, ErrMalformedFrame)
	}
	if c.Msg.Type != pb.MsgSnap || c.Msg.Snapshot == nil {
		return Chunk{}, fmt.Errorf("chunk carries a %v: %w", c.Msg.Type, ErrMalformedFrame)
	}
	rest := b[4+n:]
	c.Offset = binary.LittleEndian.Uint64(rest)
	switch rest[8] {
	case 0:
	case 1:
		c.Last = true
	default:
		return Chunk{}, fmt.Errorf("chunk last flag %d: %w", rest[8], ErrMalformedFrame)
	}
	c.Data = rest[9:]
	return c, nil
}

// frameReader reads frames from a stream, reusing one buffer.
type frameReader struct {
	r   io.Reader
	hdr [frameHeaderSize]byte
	buf []byte
}

// next reads one frame and decodes it into a message or a chunk. The
// chunk's Data is valid until the next call. At the clean end of the stream
// it returns io.EOF; a frame cut short is io.ErrUnexpectedEOF, an oversize
// one ErrFrameTooLarge, anything else that does not decode
// ErrMalformedFrame.
func (fr *frameReader) next() (kind byte, m pb.Message, c Chunk, err error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return 0, m, c, err
	}
	n := binary.LittleEndian.Uint32(fr.hdr[:4])
	kind = fr.hdr[4]
	if n > MaxFrameSize {
		return 0, m, c, fmt.Errorf("frame of %d bytes, limit %d: %w", n, MaxFrameSize, ErrFrameTooLarge)
	}
	if n == 0 {
		return 0, m, c, fmt.Errorf("frame of length 0: %w", ErrMalformedFrame)
	}
	if cap(fr.buf) < int(n-1) {
		fr.buf = make([]byte, n-1)
	}
	body := fr.buf[:n-1]
	if _, err := io.ReadFull(fr.r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, m, c, err
	}
	return decodeFrame(kind, body)
}

// decodeFrame decodes the body of a frame of kind.
func decodeFrame(kind byte, body []byte) (byte, pb.Message, Chunk, error) {
	var m pb.Message
	switch kind {
	case kindMessage:
		if err := m.Unmarshal(body); err != nil {
			return 0, m, Chunk{}, fmt.Errorf("message: %v: %w", err, ErrMalformedFrame)
		}
		return kind, m, Chunk{}, nil
	case kindChunk:
		c, err := decodeChunk(body)
		return kind, m, c, err
	}
	return 0, m, Chunk{}, fmt.Errorf("frame kind %d: %w", kind, ErrMalformedFrame)
}
