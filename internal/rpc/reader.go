package rpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// readBufSize is the size of a connection's read buffer. Frames that fit in
// it are decoded in place, without a copy.
const readBufSize = 32 << 10

// frameReader splits a byte stream into frames. It is owned by the
// connection's reader goroutine (by the dialing goroutine during a client's
// handshake).
type frameReader struct {
	r   *bufio.Reader
	max int // longest frame accepted

	// skip is the length of the last frame returned from r's buffer, to be
	// discarded before the next frame is read.
	skip int
}

func newFrameReader(r io.Reader, max int) frameReader {
	return frameReader{r: bufio.NewReaderSize(r, readBufSize), max: max}
}

// next returns the body of the next frame: the bytes after its length
// field. Unless owned is true, body aliases the read buffer and is valid
// only until the following call to next; an owned body is a fresh slice the
// caller may keep. A frame longer than max, or too short to hold a header,
// is an error: the stream cannot be trusted past it.
func (fr *frameReader) next() (body []byte, owned bool, err error) {
	if fr.skip > 0 {
		// Discard cannot fail here: the bytes are already buffered.
		fr.r.Discard(fr.skip)
		fr.skip = 0
	}
	p, err := fr.r.Peek(lenSize)
	if err != nil {
		return nil, false, unexpectedEOF(err, fr.r.Buffered() > 0)
	}
	size := le.Uint32(p)
	if uint64(size) > uint64(fr.max) {
		return nil, false, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, size, fr.max)
	}
	if size < headerSize {
		return nil, false, fmt.Errorf("%w: length %d, shorter than the header", errMalformed, size)
	}
	fr.r.Discard(lenSize)
	n := int(size)
	if n <= fr.r.Size() {
		body, err := fr.r.Peek(n)
		if err != nil {
			return nil, false, unexpectedEOF(err, true)
		}
		fr.skip = n
		return body, false, nil
	}
	body = make([]byte, n)
	if _, err := io.ReadFull(fr.r, body); err != nil {
		return nil, false, unexpectedEOF(err, true)
	}
	return body, true, nil
}

// unexpectedEOF turns io.EOF into io.ErrUnexpectedEOF when it cut a frame.
func unexpectedEOF(err error, midFrame bool) error {
	if midFrame && errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
