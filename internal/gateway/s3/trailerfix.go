package s3

import (
	"io"
	"regexp"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/s3api/utils"
)

// A signed aws-chunked body with a trailing checksum ends with its final
// chunk, the trailer and the trailer's signature. S3's documentation ends
// the trailer's line with "\r\n"; minio-go ends it with "\n\r\n", which
// versitygw's reader of signed chunks takes as part of the value ("VALUE\n"):
// it then answers BadDigest to a body whose checksum is right. The gateway
// reads such bodies through a trailerFix, which drops that "\n" below
// versitygw's reader, where the trailer's signature (computed over
// "NAME:VALUE\n") is still checked.

// signedTrailerPayload is the x-amz-content-sha256 of a signed aws-chunked
// body with a trailer.
const signedTrailerPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"

// fixTrailers is a fiber middleware, run before versitygw's: it gives the
// body of a request with signedTrailerPayload to versitygw through a
// trailerFix. versitygw wraps the body reader it finds in the request's
// context rather than the request's own stream.
func fixTrailers(ctx fiber.Ctx) error {
	if string(ctx.Request().Header.Peek("X-Amz-Content-Sha256")) == signedTrailerPayload {
		if body := ctx.Request().BodyStream(); body != nil {
			utils.ContextKeyBodyReader.Set(ctx, newTrailerFix(body))
		}
	}
	return ctx.Next()
}

// trailerHold is how many bytes a trailerFix holds back until the end of
// its body: more than a final chunk and trailer of the longest checksum.
const trailerHold = 512

// trailerFix passes a body on unchanged but for its end, which it holds
// back until it has read the whole body: a final chunk and a trailer
// written as minio-go writes them lose the "\n" that versitygw does not
// expect. The request's goroutine owns it.
type trailerFix struct {
	r      io.Reader
	buf    []byte
	lo, hi int   // buf[lo:hi]: read from r, not returned yet
	read   int64 // bytes returned
	err    error // what ended r, once it has ended
}

func newTrailerFix(r io.Reader) *trailerFix {
	return &trailerFix{r: r, buf: make([]byte, 64<<10)}
}

func (t *trailerFix) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for t.err == nil && t.hi-t.lo <= trailerHold {
		if t.lo > 0 {
			t.hi = copy(t.buf, t.buf[t.lo:t.hi])
			t.lo = 0
		}
		n, err := t.r.Read(t.buf[t.hi:])
		t.hi += n
		if err != nil {
			t.err = err
			if err == io.EOF {
				t.hi = t.lo + len(fixTrailer(t.buf[t.lo:t.hi], t.read == 0))
			}
		}
	}
	avail := t.hi - t.lo
	if t.err == nil {
		avail -= trailerHold
	}
	if avail == 0 {
		return 0, t.err
	}
	n := copy(p, t.buf[t.lo:t.lo+avail])
	t.lo += n
	t.read += int64(n)
	return n, nil
}

// minioTrailer matches the end of a body whose trailer ends with "\n\r\n";
// group 1 is what comes before the final chunk ("" at the body's start),
// group 2 the "\n" to drop.
var minioTrailer = regexp.MustCompile(`(\A|\r\n)0;chunk-signature=[0-9a-f]{64}\r\nx-amz-checksum-[a-z0-9]+:[A-Za-z0-9+/=]+(\n)\r\nx-amz-trailer-signature:[0-9a-f]{64}\r\n\r\n\z`)

// fixTrailer returns tail, the end of a body (all of it if whole), with
// the "\n" minioTrailer finds dropped, in place; tail unchanged if it
// does not match.
func fixTrailer(tail []byte, whole bool) []byte {
	m := minioTrailer.FindSubmatchIndex(tail)
	if m == nil || (m[2] == m[3] && !whole) {
		return tail
	}
	return append(tail[:m[4]], tail[m[5]:]...)
}
