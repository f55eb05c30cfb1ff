package model

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is an operation's name, the first word of its text form.
type Kind string

// The path-level operations compose a lookup and an inode-level call the way
// a server serving path-based requests does: resolve the parent (or the node)
// as the caller, then call the operation. Lookup, Readdir and Summary find
// their directory as root first, so that the call itself is what the caller's
// permissions decide.
const (
	KMkdir       Kind = "mkdir"       // Path, Mode
	KMknod       Kind = "mknod"       // Path, Mode (type and permission bits), Rdev
	KSymlink     Kind = "symlink"     // Path, Target
	KLink        Kind = "link"        // Path (not followed), Path2
	KUnlink      Kind = "unlink"      // Path
	KRmdir       Kind = "rmdir"       // Path
	KRename      Kind = "rename"      // Path, Path2, Flags
	KSetAttr     Kind = "setattr"     // Path, Follow, Set
	KSetXattr    Kind = "setxattr"    // Path, Follow, Name, Value, Flags
	KGetXattr    Kind = "getxattr"    // Path, Follow, Name
	KListXattr   Kind = "listxattr"   // Path, Follow
	KRemoveXattr Kind = "removexattr" // Path, Follow, Name
	KLookup      Kind = "lookup"      // Path (as root), Name
	KResolve     Kind = "resolve"     // Path, Follow
	KReaddir     Kind = "readdir"     // Path (as root), Cursor, Limit, Attrs
	KSummary     Kind = "summary"     // Path (as root)
	KStatfs      Kind = "statfs"      //
	KReadlink    Kind = "readlink"    // Path (not followed)

	// Inode-level calls, with parents that may be stale or not directories
	// and names that no path could carry.
	KGetAttrIno     Kind = "i.getattr"     // Ino
	KLookupIno      Kind = "i.lookup"      // Ino, Name
	KMkdirIno       Kind = "i.mkdir"       // Ino, Name, Mode
	KMknodIno       Kind = "i.mknod"       // Ino, Name, Mode, Rdev
	KSymlinkIno     Kind = "i.symlink"     // Ino, Name, Target
	KLinkIno        Kind = "i.link"        // Ino2 linked as Ino/Name
	KUnlinkIno      Kind = "i.unlink"      // Ino, Name
	KRmdirIno       Kind = "i.rmdir"       // Ino, Name
	KRenameIno      Kind = "i.rename"      // Ino/Name to Ino2/Name2, Flags
	KReadlinkIno    Kind = "i.readlink"    // Ino
	KSetAttrIno     Kind = "i.setattr"     // Ino, Set
	KListXattrIno   Kind = "i.listxattr"   // Ino
	KGetXattrIno    Kind = "i.getxattr"    // Ino, Name
	KSummaryIno     Kind = "i.summary"     // Ino
	KReaddirIno     Kind = "i.readdir"     // Ino, Cursor, Limit, Attrs
	KRemoveXattrIno Kind = "i.removexattr" // Ino, Name

	// Directory quotas (quota.go), on the directory Path names (resolved
	// as root, followed); the caller's identity decides the call.
	KQuotaSet Kind = "quota.set" // Path, Files, Bytes
	KQuotaGet Kind = "quota.get" // Path
	KQuotaRm  Kind = "quota.rm"  // Path

	// The trash (trash.go), as root or as the caller.
	KTrashLs      Kind = "trash.ls"      //
	KTrashRestore Kind = "trash.restore" // Name (the hour), Name2 (the entry; "": the whole hour)
	KTrashPurge   Kind = "trash.purge"   // Flags (1: every hour; 0: the hours ended by now)

	// Clones and snapshots (snapshot.go). A clone resolves its source and
	// the new entry's parent as the caller; the snapshot ops find their
	// directory as root, and the caller's identity decides the call.
	KClone      Kind = "clone"       // Path (the source; followed if Follow), Path2 (the new entry)
	KCloneIno   Kind = "i.clone"     // Ino copied as Ino2/Name
	KSnapCreate Kind = "snap.create" // Path, Name
	KSnapRm     Kind = "snap.rm"     // Path, Name
	KSnapLs     Kind = "snap.ls"     // Path
	KSnapDiff   Kind = "snap.diff"   // Path, Name (from), Name2 (to; "": the directory now)
)

// Kinds lists every operation kind.
var Kinds = []Kind{
	KMkdir, KMknod, KSymlink, KLink, KUnlink, KRmdir, KRename, KSetAttr,
	KSetXattr, KGetXattr, KListXattr, KRemoveXattr, KLookup, KResolve,
	KReaddir, KSummary, KStatfs, KReadlink,
	KGetAttrIno, KLookupIno, KMkdirIno, KMknodIno, KSymlinkIno, KLinkIno,
	KUnlinkIno, KRmdirIno, KRenameIno, KReadlinkIno, KSetAttrIno,
	KListXattrIno, KGetXattrIno, KSummaryIno, KReaddirIno, KRemoveXattrIno,
	KQuotaSet, KQuotaGet, KQuotaRm,
	KTrashLs, KTrashRestore, KTrashPurge,
	KClone, KCloneIno, KSnapCreate, KSnapRm, KSnapLs, KSnapDiff,
}

// InodeLevel reports whether k names nodes by inode number.
func (k Kind) InodeLevel() bool { return strings.HasPrefix(string(k), "i.") }

// Op is one operation as data. Which fields an operation reads is listed at
// its Kind; the others are zero. Its text form (String, Parse) names the
// caller and every non-zero field, so it can be written down and edited.
type Op struct {
	Kind   Kind
	Cred   Cred
	Path   string
	Path2  string
	Target string
	Ino    Ino
	Ino2   Ino
	Name   string
	Name2  string
	Mode   uint32
	Rdev   uint32
	Flags  uint32
	Follow bool
	Set    SetAttr
	Value  []byte
	Cursor string
	Limit  int
	Attrs  bool
	Files  uint64 // a quota's limit on nodes
	Bytes  uint64 // a quota's limit on bytes
}

var validNames = []struct {
	bit  uint32
	name string
}{
	{SetMode, "mode"}, {SetUID, "uid"}, {SetGID, "gid"}, {SetSize, "size"},
	{SetAtime, "atime"}, {SetMtime, "mtime"}, {SetAtimeNow, "atime-now"}, {SetMtimeNow, "mtime-now"},
}

// String is the op's one-line text form, for example
//
//	rename as=1000:1000:2000 path="/a" path2="/b/c" flags=1
//
// Strings are Go-quoted, a run of more than 16 equal bytes is written as
// "c"*N and the parts are joined with +.
func (op Op) String() string {
	var b strings.Builder
	b.WriteString(string(op.Kind))
	b.WriteString(" as=")
	b.WriteString(CredString(op.Cred))
	str := func(key, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", key, quote(v))
		}
	}
	num := func(key string, v uint64, octal bool) {
		if v == 0 {
			return
		}
		if octal {
			fmt.Fprintf(&b, " %s=%#o", key, v)
		} else {
			fmt.Fprintf(&b, " %s=%d", key, v)
		}
	}
	ino := func(key string, v Ino) {
		if v != 0 {
			fmt.Fprintf(&b, " %s=%d:%d", key, v.Partition(), v.Local())
		}
	}
	flag := func(key string, v bool) {
		if v {
			b.WriteString(" " + key)
		}
	}
	str("path", op.Path)
	str("path2", op.Path2)
	str("target", op.Target)
	ino("ino", op.Ino)
	ino("ino2", op.Ino2)
	str("name", op.Name)
	str("name2", op.Name2)
	num("mode", uint64(op.Mode), true)
	num("rdev", uint64(op.Rdev), false)
	num("flags", uint64(op.Flags), false)
	flag("follow", op.Follow)
	if op.Set.Valid != 0 {
		var names []string
		rest := op.Set.Valid
		for _, v := range validNames {
			if rest&v.bit != 0 {
				names = append(names, v.name)
				rest &^= v.bit
			}
		}
		if rest != 0 {
			names = append(names, strconv.FormatUint(uint64(rest), 10))
		}
		b.WriteString(" set=" + strings.Join(names, "|"))
	}
	num("set.mode", uint64(op.Set.Mode), true)
	num("set.uid", uint64(op.Set.UID), false)
	num("set.gid", uint64(op.Set.GID), false)
	num("set.size", op.Set.Size, false)
	if op.Set.Atime != 0 {
		fmt.Fprintf(&b, " set.atime=%d", op.Set.Atime)
	}
	if op.Set.Mtime != 0 {
		fmt.Fprintf(&b, " set.mtime=%d", op.Set.Mtime)
	}
	if op.Value != nil {
		fmt.Fprintf(&b, " value=%s", quote(string(op.Value)))
	}
	str("cursor", op.Cursor)
	num("limit", uint64(op.Limit), false)
	flag("attrs", op.Attrs)
	num("files", op.Files, false)
	num("bytes", op.Bytes, false)
	return b.String()
}

// Parse reads an op from its text form.
func Parse(line string) (Op, error) {
	line = strings.TrimSpace(line)
	kind, rest, _ := strings.Cut(line, " ")
	op := Op{Kind: Kind(kind)}
	known := false
	for _, k := range Kinds {
		known = known || k == op.Kind
	}
	if !known {
		return Op{}, fmt.Errorf("%w: unknown operation %q", ErrSyntax, kind)
	}
	for rest = strings.TrimLeft(rest, " "); rest != ""; rest = strings.TrimLeft(rest, " ") {
		i := strings.IndexAny(rest, "= ")
		if i < 0 || rest[i] == ' ' {
			if i < 0 {
				i = len(rest)
			}
			switch key := rest[:i]; key {
			case "follow":
				op.Follow = true
			case "attrs":
				op.Attrs = true
			default:
				return Op{}, fmt.Errorf("%w: %q: unknown flag %q", ErrSyntax, line, key)
			}
			rest = rest[i:]
			continue
		}
		key := rest[:i]
		rest = rest[i+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			s, n, err := unquote(rest)
			if err != nil {
				return Op{}, fmt.Errorf("%w: %q: %s: %v", ErrSyntax, line, key, err)
			}
			val, rest = s, rest[n:]
			if err := op.setString(key, val); err != nil {
				return Op{}, fmt.Errorf("%w: %q: %v", ErrSyntax, line, err)
			}
			continue
		}
		j := strings.IndexByte(rest, ' ')
		if j < 0 {
			j = len(rest)
		}
		val, rest = rest[:j], rest[j:]
		if err := op.setWord(key, val); err != nil {
			return Op{}, fmt.Errorf("%w: %q: %v", ErrSyntax, line, err)
		}
	}
	return op, nil
}

func (op *Op) setString(key, v string) error {
	switch key {
	case "path":
		op.Path = v
	case "path2":
		op.Path2 = v
	case "target":
		op.Target = v
	case "name":
		op.Name = v
	case "name2":
		op.Name2 = v
	case "value":
		op.Value = []byte(v)
	case "cursor":
		op.Cursor = v
	default:
		return fmt.Errorf("unknown string field %q", key)
	}
	return nil
}

func (op *Op) setWord(key, v string) error {
	u := func(dst *uint32) error {
		n, err := strconv.ParseUint(v, 0, 32)
		*dst = uint32(n)
		return err
	}
	i := func(dst *int64) error {
		n, err := strconv.ParseInt(v, 0, 64)
		*dst = n
		return err
	}
	ino := func(dst *Ino) error {
		p, n, ok := strings.Cut(v, ":")
		pp, err1 := strconv.ParseUint(p, 10, 16)
		nn, err2 := strconv.ParseUint(n, 10, 48)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("inode %q is not partition:number", v)
		}
		*dst = MakeIno(uint16(pp), nn)
		return nil
	}
	switch key {
	case "as":
		c, err := ParseCred(v)
		op.Cred = c
		return err
	case "ino":
		return ino(&op.Ino)
	case "ino2":
		return ino(&op.Ino2)
	case "mode":
		return u(&op.Mode)
	case "rdev":
		return u(&op.Rdev)
	case "flags":
		return u(&op.Flags)
	case "set":
		for _, name := range strings.Split(v, "|") {
			found := false
			for _, vn := range validNames {
				if vn.name == name {
					op.Set.Valid |= vn.bit
					found = true
				}
			}
			if !found {
				n, err := strconv.ParseUint(name, 10, 32)
				if err != nil {
					return fmt.Errorf("unknown setattr bit %q", name)
				}
				op.Set.Valid |= uint32(n)
			}
		}
	case "set.mode":
		return u(&op.Set.Mode)
	case "set.uid":
		return u(&op.Set.UID)
	case "set.gid":
		return u(&op.Set.GID)
	case "set.size":
		n, err := strconv.ParseUint(v, 0, 64)
		op.Set.Size = n
		return err
	case "set.atime":
		return i(&op.Set.Atime)
	case "set.mtime":
		return i(&op.Set.Mtime)
	case "limit":
		n, err := strconv.Atoi(v)
		op.Limit = n
		return err
	case "files":
		n, err := strconv.ParseUint(v, 0, 64)
		op.Files = n
		return err
	case "bytes":
		n, err := strconv.ParseUint(v, 0, 64)
		op.Bytes = n
		return err
	default:
		return fmt.Errorf("unknown field %q", key)
	}
	return nil
}

// CredString names a caller: "root", "uid:gid" or "uid:gid:g1,g2".
func CredString(c Cred) string {
	switch {
	case c.UID == 0 && c.GID == 0 && len(c.Groups) == 0:
		return "root"
	case len(c.Groups) == 0:
		return fmt.Sprintf("%d:%d", c.UID, c.GID)
	}
	gs := make([]string, len(c.Groups))
	for i, g := range c.Groups {
		gs[i] = strconv.FormatUint(uint64(g), 10)
	}
	return fmt.Sprintf("%d:%d:%s", c.UID, c.GID, strings.Join(gs, ","))
}

// ParseCred reads CredString's form.
func ParseCred(s string) (Cred, error) {
	if s == "root" {
		return Cred{}, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Cred{}, fmt.Errorf("caller %q is not root or uid:gid[:groups]", s)
	}
	var c Cred
	uid, err1 := strconv.ParseUint(parts[0], 10, 32)
	gid, err2 := strconv.ParseUint(parts[1], 10, 32)
	if err1 != nil || err2 != nil {
		return Cred{}, fmt.Errorf("caller %q is not root or uid:gid[:groups]", s)
	}
	c.UID, c.GID = uint32(uid), uint32(gid)
	if len(parts) == 3 {
		for _, g := range strings.Split(parts[2], ",") {
			n, err := strconv.ParseUint(g, 10, 32)
			if err != nil {
				return Cred{}, fmt.Errorf("caller %q: group %q", s, g)
			}
			c.Groups = append(c.Groups, uint32(n))
		}
	}
	return c, nil
}

// quote writes s as Go-quoted parts, a run of more than 16 equal bytes as
// "c"*N, joined with +.
func quote(s string) string {
	if s == "" {
		return `""`
	}
	var parts []string
	lit := 0 // start of the pending literal
	flush := func(end int) {
		if end > lit {
			parts = append(parts, strconv.Quote(s[lit:end]))
		}
	}
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		if j-i > 16 {
			flush(i)
			parts = append(parts, fmt.Sprintf("%s*%d", strconv.Quote(s[i:i+1]), j-i))
			lit = j
		}
		i = j
	}
	flush(len(s))
	return strings.Join(parts, "+")
}

// unquote reads quote's form from the start of s and returns the string and
// the number of bytes of s it used.
func unquote(s string) (string, int, error) {
	var b strings.Builder
	pos := 0
	for {
		prefix, err := strconv.QuotedPrefix(s[pos:])
		if err != nil {
			return "", 0, err
		}
		part, _ := strconv.Unquote(prefix)
		pos += len(prefix)
		if pos < len(s) && s[pos] == '*' {
			j := pos + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n, err := strconv.Atoi(s[pos+1 : j])
			if err != nil {
				return "", 0, fmt.Errorf("repeat count: %v", err)
			}
			part = strings.Repeat(part, n)
			pos = j
		}
		b.WriteString(part)
		if pos < len(s) && s[pos] == '+' && pos+1 < len(s) && s[pos+1] == '"' {
			pos++
			continue
		}
		return b.String(), pos, nil
	}
}

// FormatOps writes ops one a line.
func FormatOps(ops []Op) string {
	var b strings.Builder
	for _, op := range ops {
		b.WriteString(op.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseOps reads FormatOps's form; blank lines and lines starting with #
// are skipped.
func ParseOps(text string) ([]Op, error) {
	var ops []Op
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, err := Parse(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		ops = append(ops, op)
	}
	return ops, nil
}
