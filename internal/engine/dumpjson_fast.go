package engine

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// The JSON form's hot records, nodes and directories, written and read
// without reflection (dumpjson.go holds the form and the other records).
// Written: the fields in jrec's order, zero values left out as
// encoding/json's omitempty does, so that jq and encoding/json read the
// lines as before. Read: a line of a node or a directory is parsed by
// parseHot, which knows only the fields such a line has and the JSON
// they are written in; a line it does not take (another field, a number
// in another notation, an escape it does not decode, bytes that are not
// UTF-8) goes to encoding/json instead, whose result is the reference,
// so the fast path changes what is accepted in nothing.

// appendJSONBytes appends b as the JSON form writes bytes: a string when
// it is valid UTF-8, {"b64": "..."} otherwise.
func appendJSONBytes(dst, b []byte) []byte {
	if !utf8.Valid(b) {
		dst = append(dst, `{"b64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, `"}`...)
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, b[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, b[start:]...)
	return append(dst, '"')
}

const hexDigit = "0123456789abcdef"

// appendUintField appends ,"name":v unless v is 0.
func appendUintField(dst []byte, name string, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return strconv.AppendUint(dst, v, 10)
}

func appendIntField(dst []byte, name string, v int64) []byte {
	if v == 0 {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return strconv.AppendInt(dst, v, 10)
}

// jsonNodeLine reads one node of a checkpoint and appends its JSON line
// to dst (what encoding/json writes for d.jsonNode's record).
func (d *decoder) jsonNodeLine(dst []byte, scratch *[]byte) []byte {
	dst = append(dst, `{"t":"node"`...)
	var v [6]uint64
	for i := range v {
		v[i] = d.uint()
	}
	mode := v[1]
	for i, name := range [...]string{"ino", "mode", "uid", "gid", "nlink", "size"} {
		dst = appendUintField(dst, name, v[i])
	}
	dst = appendIntField(dst, "atime", d.int())
	dst = appendIntField(dst, "mtime", d.int())
	dst = appendIntField(dst, "ctime", d.int())
	dst = appendUintField(dst, "rdev", d.uint())
	nx := d.uint()
	if d.err == nil && nx > 1<<16 {
		d.err = fmt.Errorf("node %d: %d xattrs", v[0], nx)
	}
	if nx > 0 && d.err == nil {
		dst = append(dst, `,"xattrs":[`...)
		for i := range nx {
			if d.err != nil {
				break
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":`...)
			dst = appendJSONBytes(dst, d.strBytes(MaxXattrName, scratch))
			dst = append(dst, `,"value":`...)
			dst = appendJSONBytes(dst, d.strBytes(MaxXattrSize, scratch))
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	switch uint32(mode) & S_IFMT {
	case S_IFLNK:
		dst = append(dst, `,"target":`...)
		dst = appendJSONBytes(dst, d.strBytes(MaxPathLen, scratch))
	case S_IFDIR:
		dst = appendUintField(dst, "parent", d.uint())
	}
	return append(dst, '}', '\n')
}

// jsonDirLine reads one directory's entries and appends its JSON line.
func (d *decoder) jsonDirLine(dst []byte, scratch *[]byte) ([]byte, error) {
	dst = append(dst, `{"t":"dir"`...)
	dst = appendUintField(dst, "ino", d.uint())
	n := d.uint()
	if d.err == nil && n > 1<<32 {
		return dst, fmt.Errorf("%w: directory of %d entries", ErrBadCheckpoint, n)
	}
	if n > 0 && d.err == nil {
		dst = append(dst, `,"entries":[`...)
		for k := uint64(0); k < n && d.err == nil; k++ {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			dst = appendJSONBytes(dst, d.strBytes(MaxNameLen, scratch))
			dst = append(dst, ',')
			dst = strconv.AppendUint(dst, d.uint(), 10)
			dst = append(dst, ']')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}', '\n'), nil
}

// bytes is str for a byte string.
func (e *encoder) bytes(b []byte) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(b)))
	e.buf = append(e.buf, b...)
	e.spill()
}

// strBytes is str into *scratch, valid until the next call.
func (d *decoder) strBytes(limit int, scratch *[]byte) []byte {
	n := d.uint()
	if d.err == nil && n > uint64(limit) {
		d.err = fmt.Errorf("string of %d bytes, limit %d", n, limit)
	}
	if d.err != nil {
		return nil
	}
	if cap(*scratch) < int(n) {
		*scratch = make([]byte, n)
	}
	b := (*scratch)[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.err = noEOF(err)
		return nil
	}
	return b
}

// decodeHot decodes a line of a node or a directory into rec, which it
// resets (keeping the room of its lists): by parseHot, or by
// encoding/json where parseHot does not take the line. Byte strings in
// rec may point into line.
func decodeHot(line []byte, rec *jrec) error {
	xs, es := rec.Xattrs[:0], rec.Entries[:0]
	*rec = jrec{Xattrs: xs, Entries: es}
	if parseHot(line, rec) {
		return nil
	}
	*rec = jrec{}
	return json.Unmarshal(line, rec)
}

// hotScan is parseHot's position in a line.
type hotScan struct {
	b []byte
	i int
}

func (s *hotScan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\r' || s.b[s.i] == '\n') {
		s.i++
	}
}

// lit takes byte c, after any white space.
func (s *hotScan) lit(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str takes a string with no escapes but \" \\ \/ \n \r \t and \uXXXX
// (no surrogate), whose bytes are valid UTF-8. Without escapes the result points into
// the line.
func (s *hotScan) str() ([]byte, bool) {
	if !s.lit('"') {
		return nil, false
	}
	start := s.i
	ascii := true
	var out []byte // nil until an escape
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			res := s.b[start:s.i]
			s.i++
			if out != nil {
				res = append(out, res...)
			}
			if !ascii && !utf8.Valid(res) {
				return nil, false
			}
			return res, true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return nil, false
			}
			out = append(out, s.b[start:s.i]...)
			var r byte
			switch s.b[s.i+1] {
			case '"', '\\', '/':
				r = s.b[s.i+1]
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			case 'u':
				if s.i+6 > len(s.b) {
					return nil, false
				}
				v, err := strconv.ParseUint(string(s.b[s.i+2:s.i+6]), 16, 16)
				if err != nil || v >= 0xd800 && v < 0xe000 { // surrogates: encoding/json's
					return nil, false
				}
				out = utf8.AppendRune(out, rune(v))
				s.i += 6
				start = s.i
				continue
			default:
				return nil, false
			}
			out = append(out, r)
			s.i += 2
			start = s.i
		case c < 0x20:
			return nil, false
		default:
			if c >= 0x80 {
				ascii = false
			}
			s.i++
		}
	}
	return nil, false
}

// bytes takes a byte string: a string, or {"b64":"..."}.
func (s *hotScan) bytes() (jbytes, bool) {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '{' {
		s.i++
		if k, ok := s.str(); !ok || string(k) != "b64" || !s.lit(':') {
			return nil, false
		}
		v, ok := s.str()
		if !ok || !s.lit('}') {
			return nil, false
		}
		raw, err := base64.StdEncoding.DecodeString(string(v))
		return raw, err == nil
	}
	return s.str()
}

// uint takes a number written as digits only.
func (s *hotScan) uint() (uint64, bool) {
	s.ws()
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == start || s.i-start > 1 && s.b[start] == '0' || s.i-start > 19 {
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	var v uint64
	for _, c := range s.b[start:s.i] {
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// int takes a number written as digits with an optional minus.
func (s *hotScan) int() (int64, bool) {
	s.ws()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	v, ok := s.uint()
	if !ok || v > 1<<63-1 {
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

// parseHot parses a node's or a directory's line into rec; false: the
// line is not one it takes (encoding/json decides then).
func parseHot(line []byte, rec *jrec) bool {
	s := &hotScan{b: line}
	if !s.lit('{') {
		return false
	}
	if s.lit('}') {
		return false
	}
	for {
		key, ok := s.str()
		if !ok || !s.lit(':') {
			return false
		}
		switch string(key) {
		case "t":
			t, ok := s.str()
			if !ok {
				return false
			}
			switch string(t) {
			case "node":
				rec.T = "node"
			case "dir":
				rec.T = "dir"
			default:
				return false
			}
		case "ino":
			rec.Ino, ok = s.uint()
		case "mode":
			rec.Mode, ok = s.uint()
		case "uid":
			rec.UID, ok = s.uint()
		case "gid":
			rec.GID, ok = s.uint()
		case "nlink":
			rec.Nlink, ok = s.uint()
		case "size":
			rec.Size, ok = s.uint()
		case "rdev":
			rec.Rdev, ok = s.uint()
		case "parent":
			rec.Parent, ok = s.uint()
		case "atime":
			rec.Atime, ok = s.int()
		case "mtime":
			rec.Mtime, ok = s.int()
		case "ctime":
			rec.Ctime, ok = s.int()
		case "target":
			var t jbytes
			if t, ok = s.bytes(); ok {
				rec.Target = &t
			}
		case "xattrs":
			ok = s.xattrs(rec)
		case "entries":
			ok = s.entries(rec)
		default:
			return false
		}
		if !ok {
			return false
		}
		if s.lit('}') {
			break
		}
		if !s.lit(',') {
			return false
		}
	}
	s.ws()
	return s.i == len(s.b) && rec.T != ""
}

func (s *hotScan) xattrs(rec *jrec) bool {
	if !s.lit('[') {
		return false
	}
	rec.Xattrs = rec.Xattrs[:0]
	if s.lit(']') {
		return true
	}
	for {
		if !s.lit('{') {
			return false
		}
		var x jxattr
		var seen [2]bool
		for {
			k, ok := s.str()
			if !ok || !s.lit(':') {
				return false
			}
			switch string(k) {
			case "name":
				x.Name, ok = s.bytes()
				seen[0] = true
			case "value":
				x.Value, ok = s.bytes()
				seen[1] = true
			default:
				return false
			}
			if !ok {
				return false
			}
			if s.lit('}') {
				break
			}
			if !s.lit(',') {
				return false
			}
		}
		if !seen[0] || !seen[1] {
			return false
		}
		rec.Xattrs = append(rec.Xattrs, x)
		if s.lit(']') {
			return true
		}
		if !s.lit(',') {
			return false
		}
	}
}

func (s *hotScan) entries(rec *jrec) bool {
	if !s.lit('[') {
		return false
	}
	rec.Entries = rec.Entries[:0]
	if s.lit(']') {
		return true
	}
	for {
		if !s.lit('[') {
			return false
		}
		name, ok := s.bytes()
		if !ok || !s.lit(',') {
			return false
		}
		ino, ok := s.uint()
		if !ok || !s.lit(']') {
			return false
		}
		rec.Entries = append(rec.Entries, jentry{Name: name, Ino: ino})
		if s.lit(']') {
			return true
		}
		if !s.lit(',') {
			return false
		}
	}
}
