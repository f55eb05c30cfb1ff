package engine

// Data-driven scenario tests (github.com/cockroachdb/datadriven): each file
// in testdata/posix is one topic, a script of commands, each followed by
// "----" and the output it must produce, ended by a blank line:
//
//	mkdir /a 0755 as=1000
//	----
//	ok ino=2 drwxr-xr-x 1000:1000 nlink=2 size=4096
//
// Lines starting with # are comments. go test -run TestScenarios -rewrite
// rewrites the expected output from what the engine prints; the expected
// output in the files is meant to be Linux's, so review every change. The
// cases confirmed by running the same system calls on Linux carry a
// comment "# confirmed on Linux <kernel>, <file systems>".
//
// Each file starts with a new engine at time 0 (partition 0, so the root is
// inode 1), and "reset" starts another one; the n-th command after either
// runs at time n. Times are printed relative to the command that prints them:
// "now", or "now-3" for a time set three commands earlier. At a reset and
// at the end of the file the engine must pass Check.
//
// Paths are resolved the way a server would: ResolveParent, then the
// inode-level call; mkdir, unlink and rmdir with in=DIR make the
// inode-level call on DIR (found as root) with the first argument as the
// name, without ResolveParent. An argument may be a double-quoted Go
// string (write a space or "=" in it as \x20 or \x3d, since the directive
// is split at spaces), and <c*N> in an argument stands for N copies of the
// byte c.
//
// Commands (all take an optional as=CALLER: root (default), 1000 (uid 1000,
// gid 1000, groups 2000), 1001 (uid 1001, gid 1001), or UID:GID[:G1,G2]):
//
//	mkdir PATH MODE [in=DIR]        create PATH MODE (a regular file)
//	mknod PATH TYPE MODE [rdev=N]   TYPE: file fifo sock char block dir symlink none
//	symlink TARGET PATH             link OLD NEW
//	unlink PATH [in=DIR]            rmdir PATH [in=DIR]
//	rename OLD NEW [noreplace|exchange|flags=N]
//	stat PATH / lstat PATH          all attributes, following a final symlink or not
//	lookup DIR NAME                 Lookup of NAME in the directory DIR (found as root)
//	parent PATH                     ResolveParent
//	ls DIR [cursor=NAME] [limit=N]  one Readdir page (all entries without limit=)
//	readlink PATH
//	setattr PATH [mode=M] [uid=U] [gid=G] [size=N] [atime=T|now] [mtime=T|now]
//	lsetattr PATH ...               setattr without following a final symlink
//	xattr set PATH NAME VALUE [create|replace|both|flags=N]
//	xattr get PATH NAME / xattr list PATH / xattr rm PATH NAME
//	summary PATH                    statfs                     check
//	mkdirs DIR N                    N subdirectories d0 ... of DIR, then DIR's attributes
//	reset                           Check, then a new engine at time 0

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "posix"), func(t *testing.T, path string) {
		s := newScenario()
		datadriven.RunTest(t, path, s.run)
		if err := s.e.Check(); err != nil {
			t.Errorf("%s: Check at the end: %v", path, err)
		}
	})
}

// scenario is the state of one test file. The test's goroutine owns it.
type scenario struct {
	e   *Engine
	now int64
}

func newScenario() *scenario { return &scenario{e: New(0, 0)} }

// scenarioCommand runs one directive: its positional arguments are
// checked against min and max (max < 0: no limit) before run is called.
type scenarioCommand struct {
	min, max int
	run      func(s *scenario, a *cmdArgs) []string
}

var scenarioCommands = map[string]scenarioCommand{
	"mkdir":    {2, 2, cmdMkdir},
	"create":   {2, 2, cmdCreate},
	"mknod":    {3, 3, cmdMknod},
	"symlink":  {2, 2, cmdSymlink},
	"link":     {2, 2, cmdLink},
	"unlink":   {1, 1, cmdUnlink},
	"rmdir":    {1, 1, cmdRmdir},
	"rename":   {2, -1, cmdRename},
	"stat":     {1, 1, cmdStat},
	"lstat":    {1, 1, cmdStat},
	"lookup":   {2, 2, cmdLookup},
	"parent":   {1, 1, cmdParent},
	"ls":       {1, 1, cmdLs},
	"readlink": {1, 1, cmdReadlink},
	"setattr":  {1, 1, cmdSetattr},
	"lsetattr": {1, 1, cmdSetattr},
	"xattr":    {2, -1, cmdXattr},
	"summary":  {1, 1, cmdSummary},
	"statfs":   {0, 0, cmdStatfs},
	"check":    {0, 0, cmdCheck},
	"mkdirs":   {2, 2, cmdMkdirs},
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	if d.Input != "" {
		d.Fatalf(t, "%s: unexpected input lines", d.Cmd)
	}
	if d.Cmd == "reset" {
		if err := s.e.Check(); err != nil {
			d.Fatalf(t, "Check before the reset: %v", err)
		}
		*s = *newScenario()
		return "ok"
	}
	cmd, ok := scenarioCommands[d.Cmd]
	if !ok {
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	a, err := parseCmdArgs(d)
	if err != nil {
		d.Fatalf(t, "%s: %v", d.Cmd, err)
	}
	if len(a.pos) < cmd.min || cmd.max >= 0 && len(a.pos) > cmd.max {
		d.Fatalf(t, "%s: %d arguments", d.Cmd, len(a.pos))
	}
	s.now++
	out := cmd.run(s, a)
	if unused := a.unused(); len(unused) > 0 {
		d.Fatalf(t, "%s: unknown options %v", d.Cmd, unused)
	}
	return strings.Join(out, "\n")
}

// cmdArgs is one directive's arguments: positional ones (datadriven
// arguments without a value), options (KEY=VALUE) and the caller.
type cmdArgs struct {
	cmd  string
	pos  []string
	opts map[string]string
	used map[string]bool
	c    Cred
}

func parseCmdArgs(d *datadriven.TestData) (*cmdArgs, error) {
	a := &cmdArgs{cmd: d.Cmd, opts: map[string]string{}, used: map[string]bool{}, c: credRoot}
	for _, arg := range d.CmdArgs {
		if len(arg.Vals) == 0 {
			v, err := unquoteArg(arg.Key)
			if err != nil {
				return nil, err
			}
			a.pos = append(a.pos, v)
			continue
		}
		if len(arg.Vals) > 1 {
			return nil, fmt.Errorf("option %s has more than one value", arg.Key)
		}
		if arg.Key == "as" {
			c, err := parseCred(arg.Vals[0])
			if err != nil {
				return nil, err
			}
			a.c = c
			continue
		}
		v, err := unquoteArg(arg.Vals[0])
		if err != nil {
			return nil, err
		}
		a.opts[arg.Key] = v
	}
	return a, nil
}

// opt returns the option key and whether it was given.
func (a *cmdArgs) opt(key string) (string, bool) {
	v, ok := a.opts[key]
	a.used[key] = true
	return v, ok
}

func (a *cmdArgs) unused() []string {
	var keys []string
	for k := range a.opts {
		if !a.used[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// unquoteArg decodes a double-quoted Go string and expands <c*N>.
func unquoteArg(s string) (string, error) {
	if strings.HasPrefix(s, `"`) {
		u, err := strconv.Unquote(s)
		if err != nil {
			return "", fmt.Errorf("bad quoted argument %s: %w", s, err)
		}
		s = u
	}
	return expandRepeats(s), nil
}

// expandRepeats replaces <c*N> with N copies of c.
func expandRepeats(s string) string {
	for {
		i := strings.Index(s, "<")
		if i < 0 || i+3 >= len(s) || s[i+2] != '*' {
			return s
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			return s
		}
		n, err := strconv.Atoi(s[i+3 : i+j])
		if err != nil {
			return s
		}
		s = s[:i] + strings.Repeat(s[i+1:i+2], n) + s[i+j+1:]
	}
}

func parseCred(s string) (Cred, error) {
	switch s {
	case "root", "0":
		return credRoot, nil
	case "1000":
		return credU1, nil
	case "1001":
		return credU2, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Cred{}, fmt.Errorf("bad caller %q", s)
	}
	uid, err1 := strconv.ParseUint(parts[0], 10, 32)
	gid, err2 := strconv.ParseUint(parts[1], 10, 32)
	if err1 != nil || err2 != nil {
		return Cred{}, fmt.Errorf("bad caller %q", s)
	}
	c := Cred{UID: uint32(uid), GID: uint32(gid)}
	if len(parts) == 3 {
		for _, g := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(g, 10, 32)
			if err != nil {
				return Cred{}, fmt.Errorf("bad caller %q", s)
			}
			c.Groups = append(c.Groups, uint32(v))
		}
	}
	return c, nil
}

func octalMode(v string) uint32 { m, _ := strconv.ParseUint(v, 8, 32); return uint32(m) }

func (s *scenario) when(t int64) string {
	if t == s.now {
		return "now"
	}
	return fmt.Sprintf("now-%d", s.now-t)
}

func shortAttr(a Attr) string {
	return fmt.Sprintf("ok ino=%d %s %d:%d nlink=%d size=%d", a.Ino, modeString(a.Mode), a.UID, a.GID, a.Nlink, a.Size)
}

func (s *scenario) long(a Attr) string {
	str := fmt.Sprintf("%s atime=%s mtime=%s ctime=%s", shortAttr(a), s.when(a.Atime), s.when(a.Mtime), s.when(a.Ctime))
	if a.Rdev != 0 {
		str += fmt.Sprintf(" rdev=%d", a.Rdev)
	}
	return str
}

func outcome(err error, ok ...string) []string {
	if err != nil {
		return []string{"error: " + errName(err)}
	}
	if len(ok) == 0 {
		return []string{"ok"}
	}
	return ok
}

func attrOut(a Attr, err error) []string { return outcome(err, shortAttr(a)) }

// inDir returns the directory of in=DIR, if given.
func (s *scenario) inDir(a *cmdArgs) (ino Ino, ok bool, err error) {
	dir, ok := a.opt("in")
	if !ok {
		return 0, false, nil
	}
	d, err := s.e.Resolve(credRoot, dir, true)
	return d.Ino, true, err
}

func cmdMkdir(s *scenario, a *cmdArgs) []string {
	mode := octalMode(a.pos[1])
	dir, in, err := s.inDir(a)
	switch {
	case err != nil:
		return []string{"in: directory: " + errName(err)}
	case in:
		return attrOut(s.e.Mkdir(a.c, dir, a.pos[0], mode, s.now))
	}
	return attrOut(pathMkdir(s.e, a.c, a.pos[0], mode, s.now))
}

func cmdCreate(s *scenario, a *cmdArgs) []string {
	return attrOut(pathMknod(s.e, a.c, a.pos[0], S_IFREG|octalMode(a.pos[1]), 0, s.now))
}

var nodeTypes = map[string]uint32{"file": S_IFREG, "fifo": S_IFIFO, "sock": S_IFSOCK, "char": S_IFCHR,
	"block": S_IFBLK, "dir": S_IFDIR, "symlink": S_IFLNK, "none": 0}

func cmdMknod(s *scenario, a *cmdArgs) []string {
	typ, ok := nodeTypes[a.pos[1]]
	if !ok {
		return []string{"bad type " + a.pos[1]}
	}
	v, _ := a.opt("rdev")
	rdev, _ := strconv.ParseUint(v, 10, 32)
	attr, err := pathMknod(s.e, a.c, a.pos[0], typ|octalMode(a.pos[2]), uint32(rdev), s.now)
	if err == nil && attr.Rdev != 0 {
		return []string{fmt.Sprintf("%s rdev=%d", shortAttr(attr), attr.Rdev)}
	}
	return attrOut(attr, err)
}

func cmdSymlink(s *scenario, a *cmdArgs) []string {
	return attrOut(pathSymlink(s.e, a.c, a.pos[0], a.pos[1], s.now))
}

func cmdLink(s *scenario, a *cmdArgs) []string {
	return attrOut(pathLink(s.e, a.c, a.pos[0], a.pos[1], s.now))
}

func cmdUnlink(s *scenario, a *cmdArgs) []string {
	dir, in, err := s.inDir(a)
	switch {
	case err != nil:
		return []string{"in: directory: " + errName(err)}
	case in:
		return outcome(s.e.Unlink(a.c, dir, a.pos[0], s.now))
	}
	return outcome(pathUnlink(s.e, a.c, a.pos[0], s.now))
}

func cmdRmdir(s *scenario, a *cmdArgs) []string {
	dir, in, err := s.inDir(a)
	switch {
	case err != nil:
		return []string{"in: directory: " + errName(err)}
	case in:
		return outcome(s.e.Rmdir(a.c, dir, a.pos[0], s.now))
	}
	return outcome(pathRmdir(s.e, a.c, a.pos[0], s.now))
}

func cmdRename(s *scenario, a *cmdArgs) []string {
	var flags uint32
	for _, p := range a.pos[2:] {
		switch p {
		case "noreplace":
			flags |= RenameNoReplace
		case "exchange":
			flags |= RenameExchange
		default:
			return []string{"bad rename flag " + p}
		}
	}
	if v, ok := a.opt("flags"); ok {
		f, _ := strconv.ParseUint(v, 0, 32)
		flags = uint32(f)
	}
	return outcome(pathRename(s.e, a.c, a.pos[0], a.pos[1], flags, s.now))
}

func cmdStat(s *scenario, a *cmdArgs) []string {
	attr, err := s.e.Resolve(a.c, a.pos[0], a.cmd == "stat")
	return outcome(err, s.long(attr))
}

func cmdLookup(s *scenario, a *cmdArgs) []string {
	d, err := s.e.Resolve(credRoot, a.pos[0], true)
	if err != nil {
		return []string{"lookup: directory: " + errName(err)}
	}
	attr, err := s.e.Lookup(a.c, d.Ino, a.pos[1])
	return outcome(err, s.long(attr))
}

func cmdParent(s *scenario, a *cmdArgs) []string {
	ino, name, err := s.e.ResolveParent(a.c, a.pos[0])
	return outcome(err, fmt.Sprintf("ok dir=%d name=%q", ino, name))
}

func cmdLs(s *scenario, a *cmdArgs) []string {
	attr, err := s.e.Resolve(a.c, a.pos[0], true)
	if err != nil {
		return outcome(err)
	}
	limit := 0
	if v, ok := a.opt("limit"); ok {
		limit, _ = strconv.Atoi(v)
	}
	cursor, _ := a.opt("cursor")
	ents, next, eof, err := s.e.Readdir(a.c, attr.Ino, cursor, limit, false)
	if err != nil {
		return outcome(err)
	}
	var out []string
	for _, ent := range ents {
		out = append(out, fmt.Sprintf("%s ino=%d %s", abbrev(ent.Name), ent.Ino, typeName(ent.Type)))
	}
	if eof {
		return append(out, "eof")
	}
	return append(out, "next="+abbrev(next))
}

func cmdReadlink(s *scenario, a *cmdArgs) []string {
	attr, err := s.e.Resolve(a.c, a.pos[0], false)
	if err != nil {
		return outcome(err)
	}
	target, err := s.e.Readlink(attr.Ino)
	return outcome(err, "ok "+strconv.Quote(abbrev(target)))
}

func cmdSetattr(s *scenario, a *cmdArgs) []string {
	sa, err := parseSetAttr(a)
	if err != nil {
		return []string{err.Error()}
	}
	attr, err := pathSetAttr(s.e, a.c, a.pos[0], a.cmd == "setattr", sa, s.now)
	return outcome(err, s.long(attr))
}

// parseSetAttr reads the options mode= (octal), uid=, gid=, size=, atime=
// and mtime= (a time or "now").
func parseSetAttr(a *cmdArgs) (SetAttr, error) {
	var sa SetAttr
	for _, k := range []string{"atime", "gid", "mode", "mtime", "size", "uid"} {
		v, ok := a.opt(k)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if k == "mode" {
			n, err = strconv.ParseUint(v, 8, 32)
		}
		if err != nil && v != "now" {
			return sa, fmt.Errorf("bad %s=%s", k, v)
		}
		switch k {
		case "mode":
			sa.Valid |= SetMode
			sa.Mode = uint32(n)
		case "uid":
			sa.Valid |= SetUID
			sa.UID = uint32(n)
		case "gid":
			sa.Valid |= SetGID
			sa.GID = uint32(n)
		case "size":
			sa.Valid |= SetSize
			sa.Size = n
		case "atime":
			if v == "now" {
				sa.Valid |= SetAtimeNow
			} else {
				sa.Valid |= SetAtime
				sa.Atime = int64(n)
			}
		case "mtime":
			if v == "now" {
				sa.Valid |= SetMtimeNow
			} else {
				sa.Valid |= SetMtime
				sa.Mtime = int64(n)
			}
		}
	}
	return sa, nil
}

func cmdXattr(s *scenario, a *cmdArgs) []string {
	attr, err := s.e.Resolve(a.c, a.pos[1], true)
	if err != nil {
		return outcome(err)
	}
	op, args := a.pos[0], a.pos[2:]
	switch {
	case op == "set" && len(args) >= 2:
		var flags uint32
		for _, f := range args[2:] {
			switch f {
			case "create":
				flags |= XattrCreate
			case "replace":
				flags |= XattrReplace
			case "both":
				flags |= XattrCreate | XattrReplace
			default:
				return []string{"bad xattr flag " + f}
			}
		}
		if v, ok := a.opt("flags"); ok {
			f, _ := strconv.ParseUint(v, 0, 32)
			flags = uint32(f)
		}
		return outcome(s.e.SetXattr(a.c, attr.Ino, args[0], []byte(args[1]), flags, s.now))
	case op == "get" && len(args) == 1:
		v, err := s.e.GetXattr(a.c, attr.Ino, args[0])
		return outcome(err, "ok "+strconv.Quote(abbrev(string(v))))
	case op == "list" && len(args) == 0:
		names, err := s.e.ListXattr(a.c, attr.Ino)
		for i := range names {
			names[i] = abbrev(names[i])
		}
		return outcome(err, "ok ["+strings.Join(names, " ")+"]")
	case op == "rm" && len(args) == 1:
		return outcome(s.e.RemoveXattr(a.c, attr.Ino, args[0], s.now))
	}
	return []string{"bad xattr command"}
}

func cmdSummary(s *scenario, a *cmdArgs) []string {
	attr, err := s.e.Resolve(a.c, a.pos[0], true)
	if err != nil {
		return outcome(err)
	}
	sum, err := s.e.Summary(a.c, attr.Ino)
	return outcome(err, fmt.Sprintf("ok dirs=%d files=%d bytes=%d", sum.Dirs, sum.Files, sum.Bytes))
}

func cmdStatfs(s *scenario, _ *cmdArgs) []string {
	st := s.e.Statfs()
	return []string{fmt.Sprintf("ok inodes=%d bytes=%d bsize=%d namemax=%d", st.UsedInodes, st.UsedBytes, st.BlockSize, st.MaxName)}
}

func cmdCheck(s *scenario, _ *cmdArgs) []string {
	if err := s.e.Check(); err != nil {
		return []string{"check: " + err.Error()}
	}
	return []string{"ok"}
}

// cmdMkdirs makes N directories d0, d1, ... in DIR at the inode level, all
// at the command's time, stopping at the first error.
func cmdMkdirs(s *scenario, a *cmdArgs) []string {
	d, err := s.e.Resolve(a.c, a.pos[0], true)
	if err != nil {
		return outcome(err)
	}
	n, err := strconv.Atoi(a.pos[1])
	if err != nil {
		return []string{"bad count " + a.pos[1]}
	}
	for i := range n {
		if _, err := s.e.Mkdir(a.c, d.Ino, "d"+decimalString(i), 0o755, s.now); err != nil {
			return []string{fmt.Sprintf("d%d: error: %s", i, errName(err))}
		}
	}
	d, err = s.e.GetAttr(d.Ino)
	return attrOut(d, err)
}

// decimalString formats a non-negative i in decimal.
func decimalString(i int) string { return strconv.Itoa(i) }
