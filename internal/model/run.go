package model

import (
	"fmt"
	"strings"
)

// Target is a system under test: it applies an op at time now and returns
// what it did. An error is a failure of the target itself (a transport
// error, an error that is not a bare errno), reported as a mismatch.
// A Target belongs to the runner's goroutine.
type Target interface {
	Apply(op Op, now int64) (Result, error)
}

// Checker is an optional interface of a Target: Check runs after every
// step, for the target's own consistency checks.
type Checker interface {
	Check() error
}

// Config says how a run goes.
type Config struct {
	Seed      int64  // the generator's seed
	Steps     int    // ops after the setup op
	Partition uint16 // the oracle's partition (7 if 0)
	T0        int64  // the oracle's mkfs time (1,000,000 if 0); op i runs at T0+1+1000i
	Names     []string
	// Quotas adds the directory quota ops to the generated stream; the
	// target must implement QuotaNamespace.
	Quotas bool
	// ACLs adds POSIX ACLs to the xattr ops of the generated stream.
	ACLs bool
	// Trash turns the oracle's trash on and adds the trash ops to the
	// generated stream; the target must implement TrashNamespace and
	// have its trash on.
	Trash bool
	// Snapshots adds clones, snapshots and ops on paths through
	// .snapshot to the generated stream; the target must implement
	// SnapshotNamespace and inode-level lookups (the runner reads the
	// numbering of each copy from them).
	Snapshots bool
	// Allow restricts the op mix to what the target can express, both in
	// the generated stream and in the tree checks.
	Allow func(Op) bool
	// Normalize, if set, is applied to both results before they are
	// compared: a target that cannot observe something (the times the
	// kernel keeps, inode numbers a mount remaps) clears it on both sides.
	Normalize func(op Op, r *Result)
	// TreeEvery is how often (in steps) the whole tree is compared, and
	// always after the last step; 10 if 0, never if negative.
	TreeEvery int
	// History is how many recent steps a failure lists (25 if 0).
	History int
	// ShrinkAttempts bounds the replays Shrink makes (5,000 if 0).
	ShrinkAttempts int

	oracle func(p uint16, t0 int64) *Oracle // this package's tests: a broken oracle
}

func (c *Config) defaults() {
	if c.Partition == 0 {
		c.Partition = 7
	}
	if c.T0 == 0 {
		c.T0 = 1_000_000
	}
	if c.TreeEvery == 0 {
		c.TreeEvery = 10
	}
	if c.History == 0 {
		c.History = 25
	}
}

// Time returns the time at which op i of a run is applied.
func (c Config) Time(i int) int64 {
	c.defaults()
	return c.T0 + 1 + 1000*int64(i)
}

// Failure is the first mismatch of a run.
type Failure struct {
	Seed   int64
	Step   int    // the index of the failing op in Ops (0 is the setup op)
	Op     Op     // the op whose results differ (a tree check's op if Tree)
	Tree   bool   // found by the whole-tree comparison after Step
	Want   Result // the oracle's
	Got    Result // the target's
	Err    error  // the target's own failure, if that is what happened
	Detail string
	Ops    []Op // the ops applied, up to and including Step
	recent []record
}

// record is one applied op and the target's result, formatted only if
// the run fails.
type record struct {
	step int
	now  int64
	op   Op
	got  Result
}

func (f *Failure) Error() string {
	var b strings.Builder
	where := "step"
	if f.Tree {
		where = "tree check after step"
	}
	fmt.Fprintf(&b, "seed %d, %s %d: %s: %s\n", f.Seed, where, f.Step, f.Op, f.Detail)
	b.WriteString("last operations (target's results):\n")
	for _, r := range f.recent {
		fmt.Fprintf(&b, "  step %d t=%d: %s -> %s\n", r.step, r.now, r.op, r.got)
	}
	return b.String()
}

// Signature names the kind of mismatch, so that a shrunk list can be
// checked to fail the same way: the op kind, where it was found, and what
// each side said.
func (f *Failure) Signature() string {
	if f.Err != nil {
		return fmt.Sprintf("%s target error", f.Op.Kind)
	}
	s := fmt.Sprintf("%s want %s got %s", f.Op.Kind, ErrnoName(f.Want.Err), ErrnoName(f.Got.Err))
	if f.Tree {
		s = "tree " + s
	}
	return s
}

// Run applies cfg.Steps generated ops (after the setup op) to the oracle and
// to t, comparing every result, and returns the first mismatch or nil.
func Run(cfg Config, t Target) *Failure {
	cfg.defaults()
	o := cfg.newOracle()
	g := NewGenerator(cfg.Seed, o, GenConfig{Names: cfg.Names, Allow: cfg.Allow, Quotas: cfg.Quotas, ACLs: cfg.ACLs, Trash: cfg.Trash, Snapshots: cfg.Snapshots})
	i := 0
	return run(cfg, o, t, func() (Op, bool) {
		i++
		return g.Next(), i <= cfg.Steps+1
	})
}

// Replay applies ops (as written down from a Failure's Ops, or edited) to
// the oracle and to t in the same way; cfg.Seed only labels the failure.
func Replay(cfg Config, ops []Op, t Target) *Failure {
	cfg.defaults()
	i := 0
	return run(cfg, cfg.newOracle(), t, func() (Op, bool) {
		if i == len(ops) {
			return Op{}, false
		}
		i++
		return ops[i-1], true
	})
}

func (c *Config) newOracle() *Oracle {
	o := New(c.Partition, c.T0)
	if c.oracle != nil {
		o = c.oracle(c.Partition, c.T0)
	}
	o.SetTrash(c.Trash)
	return o
}

// runState is one run's oracle, target and record.
type runState struct {
	cfg    Config
	o      *Oracle
	t      Target
	ops    []Op
	recent []record
}

func run(cfg Config, o *Oracle, t Target, next func() (Op, bool)) *Failure {
	s := &runState{cfg: cfg, o: o, t: t}
	last := -1
	for step := 0; ; step++ {
		op, ok := next()
		if !ok {
			break
		}
		last = step
		s.ops = append(s.ops, op)
		now := cfg.Time(step)
		want, f := s.compare(op, now, step, false)
		if f != nil {
			return f
		}
		if f := s.relabel(step, op, want); f != nil {
			return f
		}
		if c, ok := t.(Checker); ok {
			if err := c.Check(); err != nil {
				return s.fail(&Failure{Step: step, Op: op, Err: err, Detail: fmt.Sprintf("target's check: %v", err)})
			}
		}
		if cfg.TreeEvery > 0 && step > 0 && step%cfg.TreeEvery == 0 {
			if f := s.tree(step); f != nil {
				return f
			}
		}
	}
	if last >= 0 && cfg.TreeEvery > 0 {
		return s.tree(last)
	}
	return nil
}

func (s *runState) fail(f *Failure) *Failure {
	f.Seed = s.cfg.Seed
	f.Ops = append([]Op(nil), s.ops...)
	f.recent = append([]record(nil), s.recent...)
	return f
}

func (s *runState) record(step int, now int64, op Op, r Result) {
	if len(s.recent) == s.cfg.History {
		copy(s.recent, s.recent[1:])
		s.recent = s.recent[:len(s.recent)-1]
	}
	s.recent = append(s.recent, record{step, now, op, r})
}

// compare applies op to both sides and compares the results; it returns
// the oracle's.
func (s *runState) compare(op Op, now int64, step int, tree bool) (Result, *Failure) {
	want := s.o.Apply(op, now)
	return want, s.differ(op, now, step, tree, want)
}

func (s *runState) differ(op Op, now int64, step int, tree bool, want Result) *Failure {
	got, err := s.t.Apply(op, now)
	if !tree {
		s.record(step, now, op, got)
	}
	if err != nil {
		return s.fail(&Failure{Step: step, Op: op, Tree: tree, Want: want, Err: err, Detail: fmt.Sprintf("target failed: %v (model %s)", err, want)})
	}
	canonical(&want)
	canonical(&got)
	if s.cfg.Normalize != nil {
		s.cfg.Normalize(op, &want)
		s.cfg.Normalize(op, &got)
	}
	if !want.Equal(got) {
		return s.fail(&Failure{Step: step, Op: op, Tree: tree, Want: want, Got: got,
			Detail: fmt.Sprintf("\n  target        %s\n  Linux (model) %s", got, want)})
	}
	return nil
}

func (s *runState) allowed(op Op) bool { return s.cfg.Allow == nil || s.cfg.Allow(op) }

// check runs the first of the alternatives the target can express.
func (s *runState) check(step int, alts ...Op) *Failure {
	for _, op := range alts {
		if s.allowed(op) {
			_, f := s.compare(op, 0, step, true)
			return f
		}
	}
	return nil
}

// tree walks the oracle's tree and checks that the target holds the same:
// every path's attributes, directory listings (paged with small limits),
// "..", symlink targets, xattrs, the counts, and the summary of the root.
func (s *runState) tree(step int) *Failure {
	s.o.freezeRefs()
	defer func() { s.o.refsFrozen = nil }()
	root := CredRoot
	if f := s.check(step, Op{Kind: KStatfs}); f != nil {
		return f
	}
	if f := s.check(step, Op{Kind: KSummary, Cred: root, Path: "/"}); f != nil {
		return f
	}
	limit := 1 + step%3
	var visit func(path string, n *node) *Failure
	visit = func(path string, n *node) *Failure {
		checks := [][]Op{
			{{Kind: KResolve, Cred: root, Path: path}},
			{{Kind: KGetAttrIno, Ino: n.ino}},
			{{Kind: KListXattrIno, Cred: root, Ino: n.ino}, {Kind: KListXattr, Cred: root, Path: path}},
			{{Kind: KListXattrIno, Cred: CredU1, Ino: n.ino}},
		}
		for _, name := range sortedKeys(n.xattrs) {
			checks = append(checks, []Op{{Kind: KGetXattrIno, Cred: root, Ino: n.ino, Name: name}, {Kind: KGetXattr, Cred: root, Path: path, Name: name}})
		}
		switch n.typ {
		case S_IFLNK:
			checks = append(checks, []Op{{Kind: KReadlinkIno, Ino: n.ino}, {Kind: KReadlink, Cred: root, Path: path}})
		case S_IFDIR:
			if p := s.o.derivedParent(n); p != n.parent {
				return s.fail(&Failure{Step: step, Tree: true, Op: Op{Kind: KResolve, Path: path},
					Detail: fmt.Sprintf("model bug: recorded parent %d, entries say %d", n.parent, p)})
			}
			checks = append(checks, []Op{{Kind: KLookupIno, Cred: root, Ino: n.ino, Name: ".."}, {Kind: KLookup, Cred: root, Path: path, Name: ".."}})
		}
		for _, alts := range checks {
			if f := s.check(step, alts...); f != nil {
				return f
			}
		}
		if n.typ != S_IFDIR {
			return nil
		}
		if f := s.listing(step, path, n, limit); f != nil {
			return f
		}
		for _, name := range sortedKeys(n.ents) {
			p := path + "/" + name
			if path == "/" {
				p = "/" + name
			}
			if f := visit(p, s.o.nodes[n.ents[name]]); f != nil {
				return f
			}
		}
		return nil
	}
	return visit("/", s.o.nodes[s.o.root])
}

// listing compares a directory's listing page by page with the given
// limit, by inode if the target can, else in one page by path.
func (s *runState) listing(step int, path string, n *node, limit int) *Failure {
	op := Op{Kind: KReaddirIno, Cred: CredRoot, Ino: n.ino, Limit: limit, Attrs: true}
	if !s.allowed(op) {
		return s.check(step, Op{Kind: KReaddir, Cred: CredRoot, Path: path, Attrs: true})
	}
	for page := 0; page <= len(n.ents); page++ {
		want, f := s.compare(op, 0, step, true)
		if f != nil {
			return f
		}
		if want.Err != 0 || want.EOF {
			return nil
		}
		op.Cursor = want.Next
	}
	return s.fail(&Failure{Step: step, Tree: true, Op: op, Detail: "model bug: the listing does not end"})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	return keys
}

// canonical makes equal results deeply equal: an empty page is nil.
func canonical(r *Result) {
	if len(r.Ents) == 0 {
		r.Ents = nil
	}
}

// Equal reports whether r and q are the same result.
func (r Result) Equal(q Result) bool {
	if r.Err != q.Err || r.Next != q.Next || r.EOF != q.EOF || r.Text != q.Text || len(r.Ents) != len(q.Ents) {
		return false
	}
	if (r.Attr == nil) != (q.Attr == nil) || r.Attr != nil && *r.Attr != *q.Attr {
		return false
	}
	for i := range r.Ents {
		if r.Ents[i] != q.Ents[i] {
			return false
		}
	}
	return true
}
