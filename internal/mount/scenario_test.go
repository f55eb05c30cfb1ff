package mount

// Data-driven scenario tests: each file in testdata/scenarios is a script of
// commands, each followed by "----" and the output it must produce, ended by
// a blank line:
//
//	mount /a/b vpart=3 target=/x ro
//	----
//	ok v=2
//
//	lookup /a/b/c
//	----
//	/a/b vpart=3 ro inner=/x/c
//
// Lines starting with # are comments. go test -run TestScenarios -update
// rewrites the expected output from what the package prints; review every
// change. Arguments may be double-quoted Go strings, and <U*N> in an
// argument stands for N copies of the text U (one byte or more, without
// '*' or '>'); output is shortened the same way (see compressRuns).
//
// Each file starts from an empty table at version 0. Commands:
//
//	mount PREFIX vpart=N [target=T] [ro]   Table.Set (target defaults to "/")
//	umount PREFIX                          Table.Remove
//	entry PREFIX vpart=N [target=T] [ro]   append an entry as given, unchecked
//	table                                  print the table
//	compile                                Compile the table
//	lookup PATH                            Lookup on the compiled table
//	route PATH                             Normalize, then Lookup
//	children DIR                           Children
//	same A B                               SameEntry
//	normalize PATH                         Normalize
//
// lookup, route, children and same compile the table first if it changed,
// and print the error if that fails. Every lookup and children is also
// checked, silently, against LookupAppend, Owner and the linear-scan model.

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// scenarioBlock is one command with its expected output, or (cmd == "") a
// comment or blank line kept verbatim.
type scenarioBlock struct {
	line     int
	cmd      string
	expected []string
	verbatim string
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
			blocks = append(blocks, scenarioBlock{verbatim: l})
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
	s := &scenario{t: t}
	var out strings.Builder
	for _, b := range blocks {
		if b.cmd == "" {
			out.WriteString(b.verbatim + "\n")
			continue
		}
		s.where = fmt.Sprintf("%s:%d", file, b.line)
		got := s.exec(b.cmd)
		for i := range got {
			got[i] = compressRuns(got[i])
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n", b.cmd, strings.Join(got, "\n"))
		if !*flagUpdate && !slices.Equal(got, b.expected) {
			t.Errorf("%s: %s\n  got:\n    %s\n  want:\n    %s", s.where, b.cmd,
				strings.Join(got, "\n    "), strings.Join(b.expected, "\n    "))
		}
	}
	if *flagUpdate {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type scenario struct {
	t     *testing.T
	where string
	table Table
	snap  *Snapshot
	err   error // of the last compile
	dirty bool
}

func (s *scenario) exec(line string) []string {
	args, err := splitArgs(line)
	if err != nil || len(args) == 0 {
		return []string{fmt.Sprintf("bad command line: %v", err)}
	}
	cmd, args := args[0], args[1:]
	need := func(n int) bool { return len(args) == n }
	switch cmd {
	case "mount", "entry":
		if len(args) < 1 {
			break
		}
		e, err := parseEntry(args)
		if err != nil {
			return []string{"bad arguments: " + err.Error()}
		}
		s.dirty = true
		if cmd == "entry" {
			s.table.Entries = append(s.table.Entries, e)
			return []string{"ok"}
		}
		nt, err := s.table.Set(e)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		s.table = nt
		return []string{fmt.Sprintf("ok v=%d", nt.Version)}
	case "umount":
		if !need(1) {
			break
		}
		nt, err := s.table.Remove(args[0])
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		s.table, s.dirty = nt, true
		return []string{fmt.Sprintf("ok v=%d", nt.Version)}
	case "table":
		if !need(0) {
			break
		}
		out := []string{fmt.Sprintf("v=%d", s.table.Version)}
		for _, e := range s.table.Entries {
			out = append(out, formatEntry(&e))
		}
		return out
	case "compile":
		if !need(0) {
			break
		}
		if err := s.compile(); err != nil {
			return []string{"error: " + err.Error()}
		}
		return []string{fmt.Sprintf("ok v=%d entries=%d", s.snap.Version(), s.snap.Len())}
	case "lookup", "route":
		if !need(1) {
			break
		}
		if err := s.compile(); err != nil {
			return []string{"error: " + err.Error()}
		}
		p := args[0]
		prefix := ""
		if cmd == "route" {
			n, err := Normalize(p)
			if err != nil {
				return []string{"error: " + err.Error()}
			}
			p, prefix = n, "path="+n+" "
		}
		return []string{prefix + s.lookup(p)}
	case "children":
		if !need(1) {
			break
		}
		if err := s.compile(); err != nil {
			return []string{"error: " + err.Error()}
		}
		got := s.snap.Children(args[0])
		if want := bruteChildren(&s.table, args[0]); !slices.Equal(got, want) {
			s.t.Errorf("%s: Children(%q) = %q, the model says %q", s.where, args[0], got, want)
		}
		if len(got) == 0 {
			return []string{"(none)"}
		}
		return []string{strings.Join(got, " ")}
	case "same":
		if !need(2) {
			break
		}
		if err := s.compile(); err != nil {
			return []string{"error: " + err.Error()}
		}
		pa, pb, same := s.snap.SameEntry(args[0], args[1])
		if same {
			return []string{"same " + pa}
		}
		return []string{fmt.Sprintf("different %s %s (EXDEV)", pa, pb)}
	case "normalize":
		if !need(1) {
			break
		}
		n, err := Normalize(args[0])
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		if q := strconv.Quote(n); q != `"`+n+`"` || strings.ContainsRune(n, ' ') {
			return []string{q} // printed the way it is written in a command
		}
		return []string{n}
	default:
		return []string{"unknown command " + cmd}
	}
	return []string{"wrong number of arguments for " + cmd}
}

func (s *scenario) compile() error {
	if s.dirty || (s.snap == nil && s.err == nil) {
		s.snap, s.err = Compile(s.table)
		s.dirty = false
	}
	return s.err
}

// lookup runs Lookup, checks it against the other forms and the model, and
// formats the answer.
func (s *scenario) lookup(p string) string {
	e, inner, ok := s.snap.Lookup(p)
	oe, ook := s.snap.Owner(p)
	ae, buf, aok := s.snap.LookupAppend([]byte("x"), p)
	me, minner, mok := bruteLookup(&s.table, p)
	switch {
	case ok != ook || ok != aok || oe != e || ae != e:
		s.t.Errorf("%s: Lookup(%q), Owner and LookupAppend disagree", s.where, p)
	case ok && string(buf) != "x"+inner:
		s.t.Errorf("%s: LookupAppend(%q) = %q, Lookup gives %q", s.where, p, buf[1:], inner)
	case ok != mok || ok && (*e != me || inner != minner):
		s.t.Errorf("%s: Lookup(%q) = %v %q %v, the model says %v %q %v", s.where, p, e, inner, ok, me, minner, mok)
	}
	if !ok {
		return "no entry"
	}
	ro := ""
	if e.ReadOnly {
		ro = " ro"
	}
	return fmt.Sprintf("%s vpart=%d%s inner=%s", e.Prefix, e.VPart, ro, inner)
}

func parseEntry(args []string) (Entry, error) {
	e := Entry{Prefix: args[0], Target: "/"}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "vpart":
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return Entry{}, err
			}
			e.VPart = uint16(n)
		case "target":
			e.Target = v
		case "ro":
			e.ReadOnly = true
		default:
			return Entry{}, fmt.Errorf("unknown argument %q", a)
		}
	}
	return e, nil
}

func formatEntry(e *Entry) string {
	ro := ""
	if e.ReadOnly {
		ro = " ro"
	}
	return fmt.Sprintf("%s vpart=%d target=%s%s", e.Prefix, e.VPart, e.Target, ro)
}

// expandRepeats replaces <U*N> with N copies of U.
func expandRepeats(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '<')
		j := strings.IndexByte(s[i+1:], '>')
		if i < 0 || j < 0 {
			b.WriteString(s)
			return b.String()
		}
		inner := s[i+1 : i+1+j]
		star := strings.LastIndexByte(inner, '*')
		n, err := strconv.Atoi(inner[star+1:])
		if star <= 0 || err != nil {
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(strings.Repeat(inner[:star], n))
		s = s[i+2+j:]
	}
}

// compressRuns writes a run of 16 or more bytes made of copies of a unit
// of one to three bytes (at least 8 copies) as <U*N>.
func compressRuns(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		best, bestN := 0, 0
		for u := 1; u <= 3 && i+u <= len(s); u++ {
			n := 1
			for i+(n+1)*u <= len(s) && s[i+n*u:i+(n+1)*u] == s[i:i+u] {
				n++
			}
			if n >= 8 && n*u >= 16 && n*u > best*bestN {
				best, bestN = u, n
			}
		}
		if best == 0 {
			b.WriteByte(s[i])
			i++
			continue
		}
		fmt.Fprintf(&b, "<%s*%d>", s[i:i+best], bestN)
		i += best * bestN
	}
	return b.String()
}

// splitArgs splits a command line at spaces, honouring double-quoted Go
// strings, and expands <U*N>.
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
