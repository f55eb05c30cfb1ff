package model

import (
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// snapTarget runs ops on a second oracle with the trash on, possibly with
// a broken rule; with reverse, it numbers the nodes of each copy but its
// root the other way round from the oracle's order, as a target may.
type snapTarget struct {
	o       *Oracle
	reverse bool
}

func (t snapTarget) Apply(op Op, now int64) (Result, error) {
	r, err := Apply(t.o, op, now)
	if t.reverse && err == nil && r.Err == 0 && r.Attr != nil && (op.Kind == KClone || op.Kind == KCloneIno || op.Kind == KSnapCreate) {
		nodes, _ := t.o.copyNodes(CredRoot, t.o.nodes[r.Attr.Ino], nil, false)
		to := map[Ino]Ino{}
		for i := 1; i < len(nodes); i++ {
			to[nodes[i].ino] = nodes[len(nodes)-i].ino
		}
		t.o.renumber(to)
	}
	return r, err
}

func newSnapTarget(cfg Config, b bug, reverse bool) func() Target {
	cfg.defaults()
	return func() Target {
		o := New(cfg.Partition, cfg.T0)
		o.bug = b
		o.SetTrash(cfg.Trash)
		return snapTarget{o, reverse}
	}
}

// TestSnapshotOpsFormatAndParse: a generated stream with clones and
// snapshots holds every kind of theirs, and writes down and reads back as
// the same ops.
func TestSnapshotOpsFormatAndParse(t *testing.T) {
	o := New(7, 1)
	g := NewGenerator(9, o, GenConfig{Snapshots: true})
	var ops []Op
	kinds := map[Kind]int{}
	snapPaths := 0
	for i := 0; i < 4000; i++ {
		op := g.Next()
		r := o.Apply(op, int64(1000*i))
		ops = append(ops, op)
		kinds[op.Kind]++
		if strings.Contains(op.Path+op.Path2, "/"+SnapshotDir+"/") && r.Err == 0 {
			snapPaths++
		}
	}
	for _, k := range []Kind{KClone, KCloneIno, KSnapCreate, KSnapRm, KSnapLs, KSnapDiff} {
		if kinds[k] == 0 {
			t.Errorf("no %s in 4000 generated ops", k)
		}
	}
	if snapPaths == 0 {
		t.Error("no op through .snapshot succeeded")
	}
	back, err := ParseOps(FormatOps(ops))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ops) {
		for i := range ops {
			if i >= len(back) || !reflect.DeepEqual(back[i], ops[i]) {
				t.Fatalf("op %d: %s reads back as %+v", i, ops[i], back)
			}
		}
		t.Fatalf("%d ops read back as %d", len(ops), len(back))
	}
}

// TestSnapshotOracleAgainstItself: streams with clones and snapshots (and
// quotas and the trash) run against a second oracle that numbers copies
// in another order: the runner takes its numbering and nothing differs.
func TestSnapshotOracleAgainstItself(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		cfg := Config{Seed: seed, Steps: 1500, Snapshots: true, Quotas: seed == 2, Trash: seed == 3}
		if f := Run(cfg, newSnapTarget(cfg, bugNone, true)()); f != nil {
			t.Fatal(f)
		}
	}
}

// TestSnapshotShrink: a target whose snapshots take changes fails, and
// the failure shrinks to a few ops.
func TestSnapshotShrink(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		cfg := Config{Seed: seed, Steps: 1000, Snapshots: true}
		f := Run(cfg, newSnapTarget(cfg, bugSnapshotWritable, false)())
		if f == nil {
			continue
		}
		ops, g := Shrink(cfg, f.Ops, newSnapTarget(cfg, bugSnapshotWritable, false))
		t.Logf("seed %d: %d ops shrunk to %d:\n%s%v", seed, len(f.Ops), len(ops), FormatOps(ops), g)
		if g == nil || g.Signature() != f.Signature() || !strings.Contains(g.Signature(), "EROFS") {
			t.Fatalf("the shrunk list fails as %v, want %s with EROFS", g, f.Signature())
		}
		if len(ops) > 5 {
			t.Fatalf("shrunk to %d ops from %d", len(ops), len(f.Ops))
		}
		return
	}
	t.Fatal("no seed of 20 finds writable snapshots")
}

// TestSnapshotRules walks through the rules of snapshot.go on the oracle.
func TestSnapshotRules(t *testing.T) {
	o := New(7, 100)
	now := int64(1000)
	step := func(line string, want syscall.Errno) Result {
		t.Helper()
		op, err := Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		now += 1000
		r := o.Apply(op, now)
		if r.Err != want {
			t.Fatalf("%s: %s, want %s", line, r, ErrnoName(want))
		}
		return r
	}
	step(`setattr as=root path="/" follow set=mode set.mode=0777`, 0)
	step(`mkdir as=1000:1000 path="/a" mode=0755`, 0)
	f := step(`mknod as=1000:1000 path="/a/f" mode=0104755`, 0)
	step(`setattr as=1000:1000 path="/a/f" follow set=size set.size=100`, 0)
	step(`link as=1000:1000 path="/a/f" path2="/a/g"`, 0)
	// A stranger may not take one; the owner may.
	step(`snap.create as=1001:1001 path="/a" name="s1"`, syscall.EPERM)
	s1 := step(`snap.create as=1000:1000 path="/a" name="s1"`, 0)
	if !strings.Contains(s1.Text, "nodes=2 bytes=100") || s1.Attr.Ctime != now {
		t.Fatalf("snapshot %s", s1)
	}
	step(`snap.create as=1000:1000 path="/a" name="s1"`, syscall.EEXIST)
	step(`snap.create as=root path="/a" name=".."`, syscall.EINVAL)
	// Changes after it leave it as it was.
	step(`setattr as=1000:1000 path="/a/f" follow set=size set.size=7`, 0)
	step(`unlink as=1000:1000 path="/a/g"`, 0)
	old := step(`resolve as=1000:1000 path="/a/.snapshot/s1/f"`, 0)
	if old.Attr.Size != 100 || old.Attr.Nlink != 2 || old.Attr.Ino == f.Attr.Ino {
		t.Fatalf("the snapshot's file: %s", old)
	}
	step(`resolve as=1000:1000 path="/a/.snapshot/s1/g"`, 0)
	if d := step(`snap.diff as=1000:1000 path="/a" name="s1"`, 0); d.Text != "M \".\" dir\nM \"./f\" file\n- \"./g\" file\n" {
		t.Fatalf("diff %q", d.Text)
	}
	// Read only, as root too.
	for _, line := range []string{
		`mknod as=root path="/a/.snapshot/s1/x" mode=0100644`,
		`unlink as=root path="/a/.snapshot/s1/f"`,
		`rename as=root path="/a/.snapshot/s1/f" path2="/a/x"`,
		`rename as=root path="/a/f" path2="/a/.snapshot/s1/x"`,
		`setattr as=root path="/a/.snapshot/s1/f" follow set=mode set.mode=0777`,
		`setxattr as=root path="/a/.snapshot/s1" follow name="user.a" value="v"`,
		`link as=root path="/a/.snapshot/s1/f" path2="/a/x"`,
		`rmdir as=root path="/a/.snapshot/s1"`,
		`quota.set as=root path="/a/.snapshot" files=9`,
		`snap.create as=root path="/a/.snapshot/s1" name="s"`,
		`clone as=root path="/a/f" path2="/a/.snapshot/s1/x"`,
	} {
		step(line, syscall.EROFS)
	}
	step(`mkdir as=1000:1000 path="/a/.snapshot" mode=0755`, syscall.EEXIST)
	step(`rename as=root path="/" path2="/b/c"`, syscall.ENOENT)
	step(`mkdir as=root path="/e" mode=0755`, 0)
	step(`rename as=root path="/e" path2="/a"`, syscall.EBUSY)
	// A clone out of a snapshot is writable and the caller's, without
	// its set-id bits.
	c := step(`clone as=1001:1001 path="/a/.snapshot/s1/f" path2="/c"`, 0)
	if c.Attr.UID != 1001 || c.Attr.GID != 1001 || c.Attr.Mode != S_IFREG|0o755 || c.Attr.Size != 100 || c.Attr.Nlink != 1 {
		t.Fatalf("clone %s", c)
	}
	step(`setattr as=1001:1001 path="/c" follow set=mode set.mode=0600`, 0)
	// Root's clone keeps the owners; a clone into its own subtree copies
	// the tree as it was.
	if r := step(`clone as=root path="/a" path2="/a/self"`, 0); r.Attr.UID != 1000 {
		t.Fatalf("root's clone %s", r)
	}
	step(`resolve as=root path="/a/self/self"`, syscall.ENOENT)
	step(`resolve as=root path="/a/self/f"`, 0)
	// A clone counts against the quotas, whole.
	step(`mkdir as=root path="/q" mode=0777`, 0)
	step(`quota.set as=root path="/q" files=2`, 0)
	step(`clone as=root path="/a" path2="/q/a"`, syscall.EDQUOT)
	step(`resolve as=root path="/q/a"`, syscall.ENOENT)
	// The area goes with the last snapshot.
	step(`snap.rm as=1001:1001 path="/a" name="s1"`, syscall.EPERM)
	step(`snap.rm as=1000:1000 path="/a" name="s1"`, 0)
	step(`lookup as=root path="/" name=".snapshots"`, syscall.ENOENT)
	step(`resolve as=root path="/a/.snapshot"`, syscall.ENOENT)
	step(`mkdir as=root path="/.snapshots" mode=0755`, syscall.EPERM)
}
