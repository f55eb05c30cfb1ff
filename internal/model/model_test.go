package model

import (
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
)

var (
	flagSeed  = flag.Int64("seed", 0, "TestOracleAgainstItself: run only this seed")
	flagSteps = flag.Int("steps", 0, "TestOracleAgainstItself: steps per seed (0: the default)")
)

// oracleTarget runs ops on a second oracle, possibly with a broken rule.
type oracleTarget struct{ o *Oracle }

func (t oracleTarget) Apply(op Op, now int64) (Result, error) { return Apply(t.o, op, now) }

func newOracleTarget(cfg Config, b bug) func() Target {
	cfg.defaults()
	return func() Target {
		o := New(cfg.Partition, cfg.T0)
		o.bug = b
		return oracleTarget{o}
	}
}

// TestOracleAgainstItself runs generated streams with the oracle as the
// target: nothing may differ, and every op must print and parse back to
// itself.
func TestOracleAgainstItself(t *testing.T) {
	steps := 2000
	if *flagSteps > 0 {
		steps = *flagSteps
	}
	seeds := []int64{1, 2, 3}
	if *flagSeed != 0 {
		seeds = []int64{*flagSeed}
	}
	for _, seed := range seeds {
		for _, names := range [][]string{Names, WideNames} {
			cfg := Config{Seed: seed, Steps: steps, Names: names}
			if f := Run(cfg, newOracleTarget(cfg, bugNone)()); f != nil {
				t.Fatal(f)
			}
		}
	}
}

func TestOpTextRoundTrip(t *testing.T) {
	o := New(7, 1)
	o.SetTrash(true)
	g := NewGenerator(5, o, GenConfig{Quotas: true, Trash: true, Snapshots: true})
	kinds := map[Kind]bool{}
	for i := 0; i < 5000; i++ {
		op := g.Next()
		o.Apply(op, int64(i))
		kinds[op.Kind] = true
		line := op.String()
		if strings.Contains(line, "\n") {
			t.Fatalf("op %d prints on more than one line: %q", i, line)
		}
		back, err := Parse(line)
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		if !reflect.DeepEqual(back, op) {
			t.Fatalf("op %d: %q parses to %+v, want %+v", i, line, back, op)
		}
	}
	for _, k := range Kinds {
		if !kinds[k] && k != KRemoveXattrIno {
			t.Errorf("the generator never produced %s in 5000 ops", k)
		}
	}
}

func TestParseExamples(t *testing.T) {
	for _, c := range []struct {
		line string
		want Op
	}{
		{`mkdir as=root path="/a" mode=0755`, Op{Kind: KMkdir, Path: "/a", Mode: 0o755}},
		{`rename as=1000:1000:2000 path="/a" path2="/b/"+"c"*20 flags=1`,
			Op{Kind: KRename, Cred: CredU1, Path: "/a", Path2: "/b/" + strings.Repeat("c", 20), Flags: 1}},
		{`setattr as=1001:1001 path="/" follow set=mode|atime-now set.mode=01777`,
			Op{Kind: KSetAttr, Cred: CredU2, Path: "/", Follow: true, Set: SetAttr{Valid: SetMode | SetAtimeNow, Mode: 0o1777}}},
		{`i.link as=root ino=7:1 ino2=7:3 name="x y"`, Op{Kind: KLinkIno, Ino: MakeIno(7, 1), Ino2: MakeIno(7, 3), Name: "x y"}},
		{`setxattr as=root path="/a" name="user.a" value="\x00"*70000`,
			Op{Kind: KSetXattr, Path: "/a", Name: "user.a", Value: make([]byte, 70000)}},
	} {
		got, err := Parse(c.line)
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.line, got, c.want)
		}
	}
	for _, bad := range []string{`frob as=root`, `mkdir as=nobody`, `mkdir path="/a`, `mkdir mode=zz`, `mkdir bogus=1`, `link ino=7`} {
		if _, err := Parse(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("%s: got %v, want ErrSyntax", bad, err)
		}
	}
}
