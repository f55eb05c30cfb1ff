package mount

// Data-driven scenario tests (github.com/cockroachdb/datadriven): each file
// in testdata/table is one topic, a script of commands, each followed by
// "----" and the output it must produce, ended by a blank line:
//
//	mount /a/b vpart=3 target=/x ro
//	----
//	ok v=2
//
//	lookup /a/b/c
//	----
//	/a/b vpart=3 ro inner=/x/c
//
// Lines starting with # are comments. go test -run TestScenarios -rewrite
// rewrites the expected output from what the package prints; review every
// change. An argument may be a double-quoted Go string (write a space or "="
// in it as \x20 or \x3d, since the directive is split at spaces), and <U*N>
// in an argument stands for N copies of the text U (one byte or more,
// without '*' or '>'); output is shortened the same way (see compressRuns).
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
//	reset                                  start again from an empty table
//
// lookup, route, children and same compile the table first if it changed,
// and print the error if that fails. Every lookup and children is also
// checked, silently, against LookupAppend, Owner and the linear-scan model.

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
	datadriven.Walk(t, filepath.Join("testdata", "table"), func(t *testing.T, path string) {
		s := &scenario{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.run(t, d)
		})
	})
}

// scenario is the state of one test file. The test's goroutine owns it.
type scenario struct {
	table Table
	snap  *Snapshot
	err   error // of the last compile
	dirty bool

	// Set for each directive.
	t     *testing.T
	where string
}

// scenarioCommand is one directive's handler; nargs is the number of
// positional arguments it takes (-1: one or more, checked by the handler).
type scenarioCommand struct {
	nargs int
	run   func(s *scenario, a *cmdArgs) []string
}

var scenarioCommands = map[string]scenarioCommand{
	"mount":     {-1, cmdMount},
	"entry":     {-1, cmdMount},
	"umount":    {1, cmdUmount},
	"table":     {0, cmdTable},
	"compile":   {0, cmdCompile},
	"lookup":    {1, cmdLookup},
	"route":     {1, cmdLookup},
	"children":  {1, cmdChildren},
	"same":      {2, cmdSame},
	"normalize": {1, cmdNormalize},
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	if d.Input != "" {
		d.Fatalf(t, "%s: unexpected input lines", d.Cmd)
	}
	if d.Cmd == "reset" {
		*s = scenario{}
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
	if cmd.nargs >= 0 && len(a.pos) != cmd.nargs || cmd.nargs < 0 && len(a.pos) == 0 {
		d.Fatalf(t, "wrong number of arguments for %s", d.Cmd)
	}
	s.t, s.where = t, d.Pos
	got := cmd.run(s, a)
	if unused := a.unused(); len(unused) > 0 {
		d.Fatalf(t, "%s: unknown options %v", d.Cmd, unused)
	}
	for i := range got {
		got[i] = compressRuns(got[i])
	}
	return strings.Join(got, "\n")
}

// cmdArgs is one directive's arguments: positional ones (datadriven
// arguments without a value) and options (KEY=VALUE).
type cmdArgs struct {
	cmd  string
	pos  []string
	opts map[string]string
	used map[string]bool
}

func parseCmdArgs(d *datadriven.TestData) (*cmdArgs, error) {
	a := &cmdArgs{cmd: d.Cmd, opts: map[string]string{}, used: map[string]bool{}}
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

// unquoteArg decodes a double-quoted Go string and expands <U*N>.
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

func cmdMount(s *scenario, a *cmdArgs) []string {
	e, err := parseEntry(a)
	if err != nil {
		return []string{"bad arguments: " + err.Error()}
	}
	s.dirty = true
	if a.cmd == "entry" {
		s.table.Entries = append(s.table.Entries, e)
		return []string{"ok"}
	}
	nt, err := s.table.Set(e)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	s.table = nt
	return []string{fmt.Sprintf("ok v=%d", nt.Version)}
}

// parseEntry reads PREFIX [ro] vpart=N [target=T].
func parseEntry(a *cmdArgs) (Entry, error) {
	e := Entry{Prefix: a.pos[0], Target: "/"}
	for _, p := range a.pos[1:] {
		if p != "ro" {
			return Entry{}, fmt.Errorf("unknown argument %q", p)
		}
		e.ReadOnly = true
	}
	if v, ok := a.opt("vpart"); ok {
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return Entry{}, err
		}
		e.VPart = uint16(n)
	}
	if v, ok := a.opt("target"); ok {
		e.Target = v
	}
	return e, nil
}

func cmdUmount(s *scenario, a *cmdArgs) []string {
	nt, err := s.table.Remove(a.pos[0])
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	s.table, s.dirty = nt, true
	return []string{fmt.Sprintf("ok v=%d", nt.Version)}
}

func cmdTable(s *scenario, _ *cmdArgs) []string {
	out := []string{fmt.Sprintf("v=%d", s.table.Version)}
	for _, e := range s.table.Entries {
		out = append(out, formatEntry(&e))
	}
	return out
}

func cmdCompile(s *scenario, _ *cmdArgs) []string {
	if err := s.compile(); err != nil {
		return []string{"error: " + err.Error()}
	}
	return []string{fmt.Sprintf("ok v=%d entries=%d", s.snap.Version(), s.snap.Len())}
}

func cmdLookup(s *scenario, a *cmdArgs) []string {
	if err := s.compile(); err != nil {
		return []string{"error: " + err.Error()}
	}
	p := a.pos[0]
	prefix := ""
	if a.cmd == "route" {
		n, err := Normalize(p)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		p, prefix = n, "path="+n+" "
	}
	return []string{prefix + s.lookup(p)}
}

func cmdChildren(s *scenario, a *cmdArgs) []string {
	if err := s.compile(); err != nil {
		return []string{"error: " + err.Error()}
	}
	got := s.snap.Children(a.pos[0])
	if want := bruteChildren(&s.table, a.pos[0]); !slices.Equal(got, want) {
		s.t.Errorf("%s: Children(%q) = %q, the model says %q", s.where, a.pos[0], got, want)
	}
	if len(got) == 0 {
		return []string{"(none)"}
	}
	return []string{strings.Join(got, " ")}
}

func cmdSame(s *scenario, a *cmdArgs) []string {
	if err := s.compile(); err != nil {
		return []string{"error: " + err.Error()}
	}
	pa, pb, same := s.snap.SameEntry(a.pos[0], a.pos[1])
	if same {
		return []string{"same " + pa}
	}
	return []string{fmt.Sprintf("different %s %s (EXDEV)", pa, pb)}
}

func cmdNormalize(_ *scenario, a *cmdArgs) []string {
	n, err := Normalize(a.pos[0])
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	if q := strconv.Quote(n); q != `"`+n+`"` || strings.ContainsRune(n, ' ') {
		return []string{q} // printed the way it is written in a command
	}
	return []string{n}
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
