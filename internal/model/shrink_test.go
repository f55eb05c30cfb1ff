package model

import (
	"testing"
)

// brokenRun finds a generated run that a broken rule makes fail.
func brokenRun(t *testing.T, b bug) (Config, *Failure) {
	t.Helper()
	for seed := int64(1); seed <= 20; seed++ {
		cfg := Config{Seed: seed, Steps: 400}
		if f := Run(cfg, newOracleTarget(cfg, b)()); f != nil {
			return cfg, f
		}
	}
	t.Fatalf("no seed of 20 finds the broken rule %d", b)
	return Config{}, nil
}

// TestReplayFromSeed: a run against an oracle that forgets to bump ctime
// on rename fails; rerunning the same seed for the reported number of steps
// reproduces the same mismatch, and so does replaying the written-down op
// list after parsing it back.
func TestReplayFromSeed(t *testing.T) {
	cfg, f := brokenRun(t, bugRenameCtime)
	t.Logf("first failure:\n%v", f)
	if len(f.Ops) != f.Step+1 {
		t.Fatalf("failure at step %d lists %d ops", f.Step, len(f.Ops))
	}
	again := cfg
	again.Steps = f.Step
	g := Run(again, newOracleTarget(cfg, bugRenameCtime)())
	if g == nil {
		t.Fatalf("seed %d for %d steps does not fail again", cfg.Seed, again.Steps)
	}
	if g.Step != f.Step || g.Signature() != f.Signature() || g.Op.String() != f.Op.String() || g.Detail != f.Detail {
		t.Fatalf("rerun differs:\n%v\nfirst:\n%v", g, f)
	}
	ops, err := ParseOps(FormatOps(f.Ops))
	if err != nil {
		t.Fatal(err)
	}
	h := Replay(cfg, ops, newOracleTarget(cfg, bugRenameCtime)())
	if h == nil || h.Step != f.Step || h.Detail != f.Detail {
		t.Fatalf("replaying the written-down ops gives %v, want the failure at step %d", h, f.Step)
	}
	if h := Replay(cfg, ops, newOracleTarget(cfg, bugNone)()); h != nil {
		t.Fatalf("the same ops against the real rules fail: %v", h)
	}
}

// TestShrink: the shrinker cuts a failing run down to the few ops that show
// the broken rule.
func TestShrink(t *testing.T) {
	for _, c := range []struct {
		name string
		bug  bug
		want string // the shrunk list
	}{
		{"rename-ctime", bugRenameCtime, `mknod as=root path="/a" mode=0100644
rename as=root path="/a" path2="/c"
`},
		{"rmdir-nonempty", bugRmdirNonEmpty, `mkdir as=root path="/a" mode=0755
symlink as=root path="/a/b" target="a"
rmdir as=root path="/a"
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, f := brokenRun(t, c.bug)
			ops, g := Shrink(cfg, f.Ops, newOracleTarget(cfg, c.bug))
			t.Logf("seed %d: %d ops shrunk to %d:\n%s%v", cfg.Seed, len(f.Ops), len(ops), FormatOps(ops), g)
			if g == nil || g.Signature() != f.Signature() {
				t.Fatalf("the shrunk list fails as %v, want %s", g, f.Signature())
			}
			if h := Replay(cfg, ops, newOracleTarget(cfg, c.bug)()); h == nil || h.Signature() != f.Signature() {
				t.Fatalf("replaying the shrunk list: %v", h)
			}
			if len(ops) > 5 || len(ops)*10 > len(f.Ops) {
				t.Fatalf("shrunk to %d ops from %d", len(ops), len(f.Ops))
			}
			if c.want != "" && FormatOps(ops) != c.want {
				t.Errorf("shrunk list:\n%swant:\n%s", FormatOps(ops), c.want)
			}
		})
	}
}

// TestShrinkBudget: with one attempt allowed, the shrinker stops early and
// still returns a list that fails the same way.
func TestShrinkBudget(t *testing.T) {
	cfg, f := brokenRun(t, bugRmdirNonEmpty)
	cfg.ShrinkAttempts = 1
	ops, g := Shrink(cfg, f.Ops, newOracleTarget(cfg, bugRmdirNonEmpty))
	if g == nil || g.Signature() != f.Signature() {
		t.Fatalf("after one attempt: %v, want %s", g, f.Signature())
	}
	if len(ops) < len(f.Ops)/2 || len(ops) <= 3 {
		t.Fatalf("one attempt shrank %d ops to %d", len(f.Ops), len(ops))
	}
}
