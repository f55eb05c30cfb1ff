package router

import (
	"errors"
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/canopyfs/canopy/internal/protocol"
)

// The routing fields, from the protocol's one statement of them.
const (
	fieldIno       = protocol.FieldIno
	fieldPath      = protocol.FieldPath
	fieldName      = protocol.FieldName
	fieldNewParent = protocol.FieldNewParent
	fieldNewPath   = protocol.FieldNewPath
	fieldSeven     = protocol.FieldSeven
	fieldEight     = protocol.FieldEight
	fieldNine      = protocol.FieldNine
)

// errMalformed marks a request whose bytes are not a protobuf message of
// the shape the routing fields need.
var errMalformed = errors.New("malformed request")

// span locates one field, tag included, in a request's bytes.
type span struct{ start, end int }

// fields are the routing fields of a request, read from its bytes without
// decoding the rest. Strings alias the request bytes: they are valid only
// as long as those are. For a field given more than once, the last one
// counts, as protobuf decoding has it.
type fields struct {
	ino       uint64
	path      string
	newParent uint64
	newPath   string
	seven     uint64 // field 7 as a varint
	name      string // field 3
	sevenStr  string // field 7 as bytes
	eight     uint64
	nine      uint64

	pathAt, newPathAt span // where fields 2 and 5 are; zero if absent
}

// readFields reads the routing fields of req. Any bytes that are not a
// well-formed protobuf message, or a routing field of the wrong wire type,
// are an error wrapping errMalformed. It never panics.
func readFields(req []byte) (fields, error) {
	var f fields
	for i := 0; i < len(req); {
		num, typ, n := protowire.ConsumeTag(req[i:])
		if n < 0 {
			return f, fmt.Errorf("%w: %v at byte %d", errMalformed, protowire.ParseError(n), i)
		}
		start := i
		i += n
		switch {
		case typ == protowire.VarintType && (num == fieldIno || num == fieldNewParent || num == fieldSeven || num == fieldEight || num == fieldNine):
			v, n := protowire.ConsumeVarint(req[i:])
			if n < 0 {
				return f, fmt.Errorf("%w: field %d: %v", errMalformed, num, protowire.ParseError(n))
			}
			i += n
			switch num {
			case fieldIno:
				f.ino = v
			case fieldNewParent:
				f.newParent = v
			case fieldSeven:
				f.seven = v
			case fieldEight:
				f.eight = v
			default:
				f.nine = v
			}
		case typ == protowire.BytesType && (num == fieldPath || num == fieldNewPath || num == fieldSeven || num == fieldName):
			v, n := protowire.ConsumeBytes(req[i:])
			if n < 0 {
				return f, fmt.Errorf("%w: field %d: %v", errMalformed, num, protowire.ParseError(n))
			}
			i += n
			s := aliasString(v)
			switch num {
			case fieldPath:
				f.path, f.pathAt = s, span{start, i}
			case fieldNewPath:
				f.newPath, f.newPathAt = s, span{start, i}
			case fieldName:
				f.name = s
			default:
				f.sevenStr = s
			}
		case num == fieldIno || num == fieldPath || num == fieldNewParent || num == fieldNewPath:
			return f, fmt.Errorf("%w: field %d of wire type %d", errMalformed, num, typ)
		default:
			n := protowire.ConsumeFieldValue(num, typ, req[i:])
			if n < 0 {
				return f, fmt.Errorf("%w: field %d: %v", errMalformed, num, protowire.ParseError(n))
			}
			i += n
		}
	}
	return f, nil
}

// aliasString returns b as a string without copying. The string is valid
// while b is unchanged.
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// rewrite appends to dst a copy of req, read into f, in which the path
// (field 2) is path and the new path (field 5) is newPath: each replaces
// the field's last occurrence, or is added at the end if the field is
// absent and the value is not empty. Every other byte is kept as it is.
func rewrite(dst, req []byte, f *fields, path, newPath string) []byte {
	type edit struct {
		at  span
		num protowire.Number
		val string
	}
	var buf [4]edit
	inPlace, tail := buf[:0:2], buf[2:2:4]
	for _, e := range [2]edit{{f.pathAt, fieldPath, path}, {f.newPathAt, fieldNewPath, newPath}} {
		old := f.path
		if e.num == fieldNewPath {
			old = f.newPath
		}
		switch {
		case e.val == old:
		case e.at.end != 0:
			inPlace = append(inPlace, e)
		case e.val != "":
			tail = append(tail, e)
		}
	}
	if len(inPlace) == 2 && inPlace[1].at.start < inPlace[0].at.start {
		inPlace[0], inPlace[1] = inPlace[1], inPlace[0]
	}
	pos := 0
	for _, e := range inPlace {
		dst = append(dst, req[pos:e.at.start]...)
		dst = appendString(dst, e.num, e.val)
		pos = e.at.end
	}
	dst = append(dst, req[pos:]...)
	for _, e := range tail {
		dst = appendString(dst, e.num, e.val)
	}
	return dst
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
