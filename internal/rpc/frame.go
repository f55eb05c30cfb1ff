package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Frame kinds.
const (
	kindCall    uint8 = 1
	kindReply   uint8 = 2
	kindHello   uint8 = 3
	kindWelcome uint8 = 4
)

const (
	// DefaultMaxFrame is the default limit on a frame's length.
	DefaultMaxFrame = 16 << 20

	// MaxGroups is the most supplementary groups a call's Cred may carry.
	MaxGroups = 64

	lenSize    = 4  // u32 length
	headerSize = 16 // kind, flags, method, call id, status
	credSize   = 10 // uid, gid, ngroups

	// minMaxFrame is the smallest MaxFrame accepted: room for a call with
	// every group and a little payload.
	minMaxFrame = 1 << 10
)

var le = binary.LittleEndian

// Frame flags.
const (
	// flagCompressed marks a call or reply whose payload is compressed with
	// the codec the connection's handshake chose.
	flagCompressed uint8 = 1 << 0

	// flagForwarded marks a call sent on behalf of another client, from
	// protocol version 3 on: the call carries that client's id and call id
	// (originSize bytes) between the header and the cred, and the server
	// treats the call as that client's (see Client.Forward).
	flagForwarded uint8 = 1 << 1

	// flagToken marks a forwarded call that carries its client's
	// credential token after the origin (u16 length, at most MaxToken
	// bytes), from protocol version 4 on; only with flagForwarded.
	flagToken uint8 = 1 << 2

	// flagEarly marks a call whose caller takes its reply once the change
	// is applied and ordered, before it is durable (protocol version 5
	// on); see Call.Early.
	flagEarly uint8 = 1 << 3
)

// originSize is the size of a forwarded call's origin: client id, call id.
const originSize = 16 + 8

// errMalformed marks frames that cannot be decoded.
var errMalformed = errors.New("malformed frame")

// frame is one decoded frame. payload aliases the decoded bytes; cred.Groups
// does not.
type frame struct {
	kind   uint8
	flags  uint8
	method uint16
	id     uint64
	status uint32
	cred   Cred // calls only

	// origin and originID are the client and call id a forwarded call was
	// made with (flagForwarded).
	origin   ClientID
	originID uint64
	token    []byte // the origin's token (flagToken); aliases the decoded bytes

	payload []byte // what follows the header (and, in a call, the cred)
}

// decodeFrame decodes a frame's body: the bytes after its length field. It
// checks everything the frame's kind allows it to check and never panics.
func decodeFrame(b []byte) (frame, error) {
	var f frame
	if len(b) < headerSize {
		return f, fmt.Errorf("%w: %d bytes, shorter than the header", errMalformed, len(b))
	}
	f.kind = b[0]
	f.flags = b[1]
	f.method = le.Uint16(b[2:])
	f.id = le.Uint64(b[4:])
	f.status = le.Uint32(b[12:])
	b = b[headerSize:]
	if f.flags&^(flagCompressed|flagForwarded|flagToken|flagEarly) != 0 || f.flags != 0 && f.kind != kindCall && f.kind != kindReply ||
		f.flags&(flagForwarded|flagEarly) != 0 && f.kind != kindCall || f.flags&flagToken != 0 && f.flags&flagForwarded == 0 {
		return f, fmt.Errorf("%w: flags %#x in a frame of kind %d", errMalformed, f.flags, f.kind)
	}
	switch f.kind {
	case kindCall:
		if f.status != 0 {
			return f, fmt.Errorf("%w: call with status %#x", errMalformed, f.status)
		}
		if f.flags&flagForwarded != 0 {
			if len(b) < originSize {
				return f, fmt.Errorf("%w: forwarded call too short for its origin", errMalformed)
			}
			copy(f.origin[:], b)
			f.originID = le.Uint64(b[16:])
			b = b[originSize:]
			if f.flags&flagToken != 0 {
				if len(b) < 2 {
					return f, fmt.Errorf("%w: forwarded call too short for its token", errMalformed)
				}
				n := int(le.Uint16(b))
				if n == 0 || n > MaxToken || len(b) < 2+n {
					return f, fmt.Errorf("%w: forwarded call with a token of %d bytes", errMalformed, n)
				}
				f.token = b[2 : 2+n]
				b = b[2+n:]
			}
		}
		if len(b) < credSize {
			return f, fmt.Errorf("%w: call too short for its cred", errMalformed)
		}
		f.cred.UID = le.Uint32(b)
		f.cred.GID = le.Uint32(b[4:])
		n := int(le.Uint16(b[8:]))
		b = b[credSize:]
		if n > MaxGroups {
			return f, fmt.Errorf("%w: %d groups, limit %d", errMalformed, n, MaxGroups)
		}
		if len(b) < 4*n {
			return f, fmt.Errorf("%w: call too short for its %d groups", errMalformed, n)
		}
		if n > 0 {
			f.cred.Groups = make([]uint32, n)
			for i := range f.cred.Groups {
				f.cred.Groups[i] = le.Uint32(b[4*i:])
			}
			b = b[4*n:]
		}
	case kindReply:
	case kindHello, kindWelcome:
		if f.method != 0 || f.id != 0 || f.status != 0 {
			return f, fmt.Errorf("%w: handshake frame with method, id or status set", errMalformed)
		}
	default:
		return f, fmt.Errorf("%w: unknown kind %d", errMalformed, f.kind)
	}
	f.payload = b
	return f, nil
}

// callSize returns the length field of a call frame.
func callSize(cred *Cred, payload []byte) int {
	return headerSize + credSize + 4*len(cred.Groups) + len(payload)
}

// origin is the identity a forwarded call is made with.
type origin struct {
	client ClientID
	id     uint64
	token  []byte // the client's credential token, or nil (version 4 on)
}

// size returns the bytes the origin takes in a call frame.
func (o *origin) size() int {
	if len(o.token) > 0 {
		return originSize + 2 + len(o.token)
	}
	return originSize
}

// replySize returns the length field of a reply frame.
func replySize(payload []byte) int { return headerSize + len(payload) }

// appendHeader appends a frame's length field and fixed header.
func appendHeader(b []byte, size int, kind, flags uint8, method uint16, id uint64, status uint32) []byte {
	b = slices.Grow(b, lenSize+size)
	b = le.AppendUint32(b, uint32(size))
	b = append(b, kind, flags)
	b = le.AppendUint16(b, method)
	b = le.AppendUint64(b, id)
	return le.AppendUint32(b, status)
}

// appendCall appends a call frame to b. The caller has checked that cred has
// at most MaxGroups groups and that the frame fits the peer's MaxFrame.
func appendCall(b []byte, id uint64, method uint16, flags uint8, cred *Cred, payload []byte) []byte {
	return appendCallFrom(b, id, method, flags, nil, cred, payload)
}

// appendCallFrom appends a call frame to b, a forwarded one if from is not
// nil (flagForwarded is then set).
func appendCallFrom(b []byte, id uint64, method uint16, flags uint8, from *origin, cred *Cred, payload []byte) []byte {
	size := callSize(cred, payload)
	if from != nil {
		flags |= flagForwarded
		size += from.size()
		if len(from.token) > 0 {
			flags |= flagToken
		}
	}
	b = appendHeader(b, size, kindCall, flags, method, id, 0)
	if from != nil {
		b = append(b, from.client[:]...)
		b = le.AppendUint64(b, from.id)
		if len(from.token) > 0 {
			b = le.AppendUint16(b, uint16(len(from.token)))
			b = append(b, from.token...)
		}
	}
	b = le.AppendUint32(b, cred.UID)
	b = le.AppendUint32(b, cred.GID)
	b = le.AppendUint16(b, uint16(len(cred.Groups)))
	for _, g := range cred.Groups {
		b = le.AppendUint32(b, g)
	}
	return append(b, payload...)
}

// appendReply appends a reply frame to b.
func appendReply(b []byte, id uint64, method uint16, status uint32, flags uint8, payload []byte) []byte {
	b = appendHeader(b, replySize(payload), kindReply, flags, method, id, status)
	return append(b, payload...)
}

func errUnexpectedKind(kind uint8) error {
	return fmt.Errorf("%w: unexpected kind %d", errMalformed, kind)
}
