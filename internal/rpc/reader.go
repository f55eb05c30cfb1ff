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

// frameReader splits a byte stream into frames. It is owned by one
// goroutine at a time: on a server, the connection's reader goroutine; on a
// client, the dialing goroutine during the handshake, then whichever
// goroutine owns the connection's read side.
//
// A read that fails with a timeout may be retried: next then resumes the
// frame it was reading, so a client's caller may read with a deadline and
// leave a frame half read to the reader goroutine.
type frameReader struct {
	r   *bufio.Reader
	max int // longest frame accepted

	// skip is the length of the last frame returned from r's buffer, to be
	// discarded before the next frame is read.
	skip int

	// big is the body of a frame too long for r's buffer, read into a
	// slice of its own, of which got bytes are in.
	big []byte
	got int
}

func newFrameReader(r io.Reader, max int) frameReader {
	return frameReader{r: bufio.NewReaderSize(r, readBufSize), max: max}
}

// next returns the body of the next frame: the bytes after its length
// field. Unless owned is true, body aliases the read buffer and is valid
// only until the following call to next; an owned body is a fresh slice the
// caller may keep. A frame longer than max, or too short to hold a header,
// is an error: the stream cannot be trusted past it. After any other error
// only a timeout may be retried.
func (fr *frameReader) next() (body []byte, owned bool, err error) {
	if fr.big != nil {
		return fr.readBig()
	}
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
	n := lenSize + int(size)
	if n <= fr.r.Size() {
		// Nothing is consumed until the whole frame is in.
		p, err := fr.r.Peek(n)
		if err != nil {
			return nil, false, unexpectedEOF(err, true)
		}
		fr.skip = n
		return p[lenSize:], false, nil
	}
	fr.r.Discard(lenSize)
	fr.big, fr.got = make([]byte, size), 0
	return fr.readBig()
}

// readBig goes on reading a frame too long for the read buffer.
func (fr *frameReader) readBig() (body []byte, owned bool, err error) {
	n, err := io.ReadFull(fr.r, fr.big[fr.got:])
	fr.got += n
	if err != nil {
		return nil, false, unexpectedEOF(err, true)
	}
	body, fr.big = fr.big, nil
	return body, true, nil
}

// buffered reports whether the next frame is whole in the read buffer, so
// that next returns it without reading from the connection. A frame with
// an invalid length counts as not buffered: next reports it, after the
// caller has done what it does before reading.
func (fr *frameReader) buffered() bool {
	if fr.big != nil {
		return false
	}
	n := fr.r.Buffered() - fr.skip
	if n < lenSize {
		return false
	}
	// Peek cannot read here: the bytes are already buffered.
	p, _ := fr.r.Peek(fr.skip + lenSize)
	size := le.Uint32(p[fr.skip:])
	return size >= headerSize && uint64(size) <= uint64(fr.max) && uint64(n-lenSize) >= uint64(size)
}

// unexpectedEOF turns io.EOF into io.ErrUnexpectedEOF when it cut a frame.
func unexpectedEOF(err error, midFrame bool) error {
	if midFrame && errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
