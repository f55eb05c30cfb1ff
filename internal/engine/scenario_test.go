package engine

// Data-driven scenario tests: each file in testdata/scenarios is a script of
// commands, each followed by "----" and the output it must produce, ended by
// a blank line:
//
//	mkdir /a 0755 as=1000
//	----
//	ok ino=2 drwxr-xr-x 1000:1000 nlink=2 size=4096
//
// Lines starting with # are comments. go test -run TestScenarios -update
// rewrites the expected output from what the engine prints; the expected
// output in the files is meant to be Linux's, so review every change.
//
// The engine is created at time 0 (partition 0, so the root is inode 1) and
// the n-th command of a file runs at time n. Times are printed relative to
// the command that prints them: "now", or "now-3" for a time set three
// commands earlier.
//
// Paths are resolved the way a server would: ResolveParent, then the
// inode-level call. Arguments may be double-quoted Go strings, and
// <c*N> in an argument stands for N copies of the byte c.
//
// Commands (all take an optional as=CALLER: root (default), 1000 (uid 1000,
// gid 1000, groups 2000), 1001 (uid 1001, gid 1001), or UID:GID[:G1,G2]):
//
//	mkdir PATH MODE                 create PATH MODE (a regular file)
//	mknod PATH TYPE MODE [rdev=N]   TYPE: file fifo sock char block dir symlink none
//	symlink TARGET PATH             link OLD NEW
//	unlink PATH                     rmdir PATH
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

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var flagUpdate = flag.Bool("update", false, "TestScenarios: rewrite the expected output in testdata/scenarios")

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios in testdata/scenarios")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScenario(t, file)
		})
	}
}

// scenarioBlock is one command with its expected output, or (cmd == "")
// a run of comment and blank lines kept verbatim.
type scenarioBlock struct {
	line     int
	cmd      string
	expected []string
	verbatim []string
}

func parseScenario(t *testing.T, file string) []scenarioBlock {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var blocks []scenarioBlock
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			blocks = append(blocks, scenarioBlock{verbatim: []string{l}})
			continue
		}
		b := scenarioBlock{line: i + 1, cmd: l}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command without a ---- line after it", file, i+1)
		}
		i += 2
		for ; i < len(lines) && lines[i] != ""; i++ {
			b.expected = append(b.expected, lines[i])
		}
		i-- // the blank line (if any) is kept as its own block
		blocks = append(blocks, b)
	}
	return blocks
}

func runScenario(t *testing.T, file string) {
	blocks := parseScenario(t, file)
	s := &scenario{e: New(0, 0)}
	var out strings.Builder
	failed := 0
	for _, b := range blocks {
		if b.cmd == "" {
			for _, l := range b.verbatim {
				out.WriteString(l + "\n")
			}
			continue
		}
		s.now++
		got := s.exec(b.cmd)
		fmt.Fprintf(&out, "%s\n----\n%s\n", b.cmd, strings.Join(got, "\n"))
		if strings.Join(got, "\n") != strings.Join(b.expected, "\n") && !*flagUpdate {
			failed++
			t.Errorf("%s:%d: %s\n  got:\n    %s\n  want:\n    %s", file, b.line, b.cmd,
				strings.Join(got, "\n    "), strings.Join(b.expected, "\n    "))
		}
	}
	if err := s.e.Check(); err != nil {
		t.Errorf("%s: Check at the end: %v", file, err)
	}
	if *flagUpdate {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type scenario struct {
	e   *Engine
	now int64
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

// splitArgs splits a command line at spaces, honouring double-quoted Go
// strings, and expands <c*N>.
func splitArgs(line string) ([]string, error) {
	var args []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, err
			}
			u, _ := strconv.Unquote(q)
			args = append(args, expandRepeats(u))
			line = line[len(q):]
			continue
		}
		i := strings.IndexByte(line, ' ')
		if i < 0 {
			i = len(line)
		}
		args = append(args, expandRepeats(line[:i]))
		line = line[i:]
	}
	return args, nil
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

func (s *scenario) when(t int64) string {
	if t == s.now {
		return "now"
	}
	return fmt.Sprintf("now-%d", s.now-t)
}

func (s *scenario) short(a Attr) string {
	return fmt.Sprintf("ok ino=%d %s %d:%d nlink=%d size=%d", a.Ino, modeString(a.Mode), a.UID, a.GID, a.Nlink, a.Size)
}

func (s *scenario) long(a Attr) string {
	str := fmt.Sprintf("%s atime=%s mtime=%s ctime=%s", s.short(a), s.when(a.Atime), s.when(a.Mtime), s.when(a.Ctime))
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

func (s *scenario) exec(line string) []string {
	args, err := splitArgs(line)
	if err != nil || len(args) == 0 {
		return []string{fmt.Sprintf("bad command: %v", err)}
	}
	c := credRoot
	opts := map[string]string{}
	var pos []string
	for _, a := range args[1:] {
		if k, v, ok := strings.Cut(a, "="); ok && k != "" && !strings.Contains(k, "/") {
			if k == "as" {
				if c, err = parseCred(v); err != nil {
					return []string{err.Error()}
				}
				continue
			}
			opts[k] = v
			continue
		}
		pos = append(pos, a)
	}
	need := func(n int) bool { return len(pos) >= n }
	octal := func(v string) uint32 { m, _ := strconv.ParseUint(v, 8, 32); return uint32(m) }
	e, now := s.e, s.now
	attrOut := func(a Attr, err error) []string { return outcome(err, s.short(a)) }
	switch cmd := args[0]; cmd {
	case "mkdir":
		if need(2) {
			return attrOut(pathMkdir(e, c, pos[0], octal(pos[1]), now))
		}
	case "create":
		if need(2) {
			return attrOut(pathMknod(e, c, pos[0], S_IFREG|octal(pos[1]), 0, now))
		}
	case "mknod":
		if need(3) {
			types := map[string]uint32{"file": S_IFREG, "fifo": S_IFIFO, "sock": S_IFSOCK, "char": S_IFCHR,
				"block": S_IFBLK, "dir": S_IFDIR, "symlink": S_IFLNK, "none": 0}
			typ, ok := types[pos[1]]
			if !ok {
				return []string{"bad type " + pos[1]}
			}
			rdev, _ := strconv.ParseUint(opts["rdev"], 10, 32)
			a, err := pathMknod(e, c, pos[0], typ|octal(pos[2]), uint32(rdev), now)
			if err == nil && a.Rdev != 0 {
				return []string{fmt.Sprintf("%s rdev=%d", s.short(a), a.Rdev)}
			}
			return attrOut(a, err)
		}
	case "symlink":
		if need(2) {
			return attrOut(pathSymlink(e, c, pos[0], pos[1], now))
		}
	case "link":
		if need(2) {
			return attrOut(pathLink(e, c, pos[0], pos[1], now))
		}
	case "unlink":
		if need(1) {
			return outcome(pathUnlink(e, c, pos[0], now))
		}
	case "rmdir":
		if need(1) {
			return outcome(pathRmdir(e, c, pos[0], now))
		}
	case "rename":
		if need(2) {
			var flags uint32
			for _, p := range pos[2:] {
				switch p {
				case "noreplace":
					flags |= RenameNoReplace
				case "exchange":
					flags |= RenameExchange
				default:
					return []string{"bad rename flag " + p}
				}
			}
			if v, ok := opts["flags"]; ok {
				f, _ := strconv.ParseUint(v, 0, 32)
				flags = uint32(f)
			}
			return outcome(pathRename(e, c, pos[0], pos[1], flags, now))
		}
	case "stat", "lstat":
		if need(1) {
			a, err := e.Resolve(c, pos[0], cmd == "stat")
			return outcome(err, s.long(a))
		}
	case "lookup":
		if need(2) {
			d, err := e.Resolve(credRoot, pos[0], true)
			if err != nil {
				return []string{"lookup: directory: " + errName(err)}
			}
			a, err := e.Lookup(c, d.Ino, pos[1])
			return outcome(err, s.long(a))
		}
	case "parent":
		if need(1) {
			ino, name, err := e.ResolveParent(c, pos[0])
			return outcome(err, fmt.Sprintf("ok dir=%d name=%q", ino, name))
		}
	case "ls":
		if need(1) {
			return s.ls(c, pos[0], opts)
		}
	case "readlink":
		if need(1) {
			a, err := e.Resolve(c, pos[0], false)
			if err != nil {
				return outcome(err)
			}
			target, err := e.Readlink(a.Ino)
			return outcome(err, "ok "+strconv.Quote(abbrev(target)))
		}
	case "setattr", "lsetattr":
		if need(1) {
			sa, err := parseSetAttr(opts)
			if err != nil {
				return []string{err.Error()}
			}
			a, err := pathSetAttr(e, c, pos[0], cmd == "setattr", sa, now)
			return outcome(err, s.long(a))
		}
	case "xattr":
		if need(2) {
			return s.xattr(c, pos, opts)
		}
	case "summary":
		if need(1) {
			a, err := e.Resolve(c, pos[0], true)
			if err != nil {
				return outcome(err)
			}
			sum, err := e.Summary(c, a.Ino)
			return outcome(err, fmt.Sprintf("ok dirs=%d files=%d bytes=%d", sum.Dirs, sum.Files, sum.Bytes))
		}
	case "statfs":
		st := e.Statfs()
		return []string{fmt.Sprintf("ok inodes=%d bytes=%d bsize=%d namemax=%d", st.UsedInodes, st.UsedBytes, st.BlockSize, st.MaxName)}
	case "check":
		if err := e.Check(); err != nil {
			return []string{"check: " + err.Error()}
		}
		return []string{"ok"}
	default:
		return []string{"unknown command " + cmd}
	}
	return []string{"missing arguments"}
}

func parseSetAttr(opts map[string]string) (SetAttr, error) {
	var sa SetAttr
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := opts[k]
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
		default:
			return sa, fmt.Errorf("unknown attribute %s", k)
		}
	}
	return sa, nil
}

func (s *scenario) ls(c Cred, path string, opts map[string]string) []string {
	a, err := s.e.Resolve(c, path, true)
	if err != nil {
		return outcome(err)
	}
	limit := 0
	if v, ok := opts["limit"]; ok {
		limit, _ = strconv.Atoi(v)
	}
	var out []string
	ents, next, eof, err := s.e.Readdir(c, a.Ino, opts["cursor"], limit, false)
	if err != nil {
		return outcome(err)
	}
	for _, ent := range ents {
		out = append(out, fmt.Sprintf("%s ino=%d %s", abbrev(ent.Name), ent.Ino, typeName(ent.Type)))
	}
	if eof {
		out = append(out, "eof")
	} else {
		out = append(out, "next="+abbrev(next))
	}
	return out
}

func (s *scenario) xattr(c Cred, pos []string, opts map[string]string) []string {
	a, err := s.e.Resolve(c, pos[1], true)
	if err != nil {
		return outcome(err)
	}
	switch pos[0] {
	case "set":
		if len(pos) < 4 {
			break
		}
		var flags uint32
		for _, f := range pos[4:] {
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
		if v, ok := opts["flags"]; ok {
			f, _ := strconv.ParseUint(v, 0, 32)
			flags = uint32(f)
		}
		return outcome(s.e.SetXattr(c, a.Ino, pos[2], []byte(pos[3]), flags, s.now))
	case "get":
		if len(pos) < 3 {
			break
		}
		v, err := s.e.GetXattr(c, a.Ino, pos[2])
		return outcome(err, "ok "+strconv.Quote(abbrev(string(v))))
	case "list":
		names, err := s.e.ListXattr(c, a.Ino)
		for i := range names {
			names[i] = abbrev(names[i])
		}
		return outcome(err, "ok ["+strings.Join(names, " ")+"]")
	case "rm":
		if len(pos) < 3 {
			break
		}
		return outcome(s.e.RemoveXattr(c, a.Ino, pos[2], s.now))
	}
	return []string{"bad xattr command"}
}
