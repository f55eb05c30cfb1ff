package engine

// TestModel runs the random op stream of internal/model against the engine
// and compares every result with the reference model there (Linux's
// semantics). The adapters below convert between the engine's types and the
// model's: engineNS lets model.Apply drive the engine, oracleNS lets the
// engine's tests drive the model through the namespace interface.

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/model"
)

var (
	flagSeed  = flag.Int64("seed", 0, "TestModel: run only this seed (0: the default seeds)")
	flagSteps = flag.Int("steps", 0, "TestModel: steps per seed (0: the default)")
	flagSeeds = flag.Int("seeds", 0, "TestModel: number of default seeds to run (0: the default)")
	flagOps   = flag.String("ops", "", "TestModel: replay the ops written in this file (model.FormatOps) instead of generating them")
)

// modelVariant is one way of running the randomized test: the pool of
// names directories are built from, and whether the idle sweep packs every
// directory after every step (so that every operation meets packed
// directories and inflates them), and whether a freeze is always live
// (so that operations meet shared chunks and copy them; a new freeze at
// step or two makes nearly every operation meet them).
type modelVariant struct {
	name    string
	names   []string
	compact bool
	freeze  int  // if not 0: keep a freeze live, a new one every freeze steps
	seeds   int  // default seeds to run
	quotas  bool // directory quota ops in the mix
	acls    bool // POSIX ACLs in the xattr ops
	reload  int  // if not 0: reload the engine from its own checkpoint every reload steps
	trash   bool // the trash on, and its ops in the mix
	snaps   bool // clones, snapshots and ops through .snapshot in the mix
}

var modelVariants = []modelVariant{
	{name: "small", names: model.Names, seeds: defaultModelSeeds},
	{name: "compact", names: model.Names, compact: true, seeds: 4},
	{name: "wide", names: model.WideNames, seeds: 4},
	{name: "wide-compact", names: model.WideNames, compact: true, seeds: 4},
	{name: "frozen", names: model.Names, freeze: 2, seeds: 2},
	{name: "frozen-long", names: model.WideNames, freeze: 25, seeds: 2},
	{name: "frozen-compact", names: model.Names, compact: true, freeze: 5, seeds: 2},
	{name: "quotas", names: model.Names, quotas: true, seeds: 6},
	{name: "quotas-wide", names: model.WideNames, quotas: true, seeds: 2},
	{name: "quotas-reload", names: model.Names, quotas: true, reload: 7, seeds: 2},
	{name: "quotas-frozen", names: model.Names, quotas: true, freeze: 3, seeds: 2},
	{name: "acls", names: model.Names, acls: true, seeds: 4},
	{name: "acls-reload", names: model.Names, acls: true, quotas: true, reload: 7, seeds: 2},
	{name: "acls-frozen", names: model.Names, acls: true, freeze: 3, seeds: 2},
	{name: "trash", names: model.Names, trash: true, seeds: 4},
	{name: "trash-quotas", names: model.Names, trash: true, quotas: true, seeds: 2},
	{name: "trash-reload", names: model.Names, trash: true, quotas: true, reload: 7, seeds: 2},
	{name: "trash-compact", names: model.WideNames, trash: true, compact: true, seeds: 2},
	{name: "snapshots", names: model.Names, snaps: true, seeds: 4},
	{name: "snapshots-quotas-trash", names: model.Names, snaps: true, quotas: true, trash: true, seeds: 2},
	{name: "snapshots-reload", names: model.Names, snaps: true, acls: true, reload: 7, seeds: 2},
	{name: "snapshots-compact", names: model.WideNames, snaps: true, compact: true, seeds: 1},
	{name: "snapshots-frozen", names: model.Names, snaps: true, freeze: 3, seeds: 1},
}

const (
	defaultModelSeeds = 16
	defaultModelSteps = 5000
	modelPartition    = 7
	modelT0           = 1_000_000
)

// TestModel applies the same random operations to the engine and to the
// model and compares every result, then the whole trees. Reproduce a
// failure with go test -run TestModel/variant -seed=N (-steps=M); the
// failure also lists its ops, which model.Replay and model.Shrink take.
func TestModel(t *testing.T) {
	steps := defaultModelSteps
	if *flagSteps > 0 {
		steps = *flagSteps
	}
	for _, v := range modelVariants {
		t.Run(v.name, func(t *testing.T) { runModel(t, v, steps) })
	}
}

func runModel(t *testing.T, v modelVariant, steps int) {
	if *flagOps != "" {
		replayModel(t, v, *flagOps)
		return
	}
	seeds := []int64{}
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		k := v.seeds
		if *flagSeeds > 0 {
			k = *flagSeeds
		}
		for i := 1; i <= k; i++ {
			seeds = append(seeds, int64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			start := time.Now()
			cfg := model.Config{Seed: seed, Steps: steps, Partition: modelPartition, T0: modelT0, Names: v.names, Quotas: v.quotas, ACLs: v.acls, Trash: v.trash, Snapshots: v.snaps}
			newTarget := func() model.Target { return newVariantTarget(v) }
			if f := model.Run(cfg, newTarget()); f != nil {
				ops, g := model.Shrink(cfg, f.Ops, newTarget)
				t.Fatalf("%v\nreproduce: go test ./internal/engine -run 'TestModel/%s' -seed=%d -steps=%d\nshrunk to %d ops (%v):\n%s",
					f, v.name, seed, f.Step, len(ops), g.Signature(), model.FormatOps(ops))
			}
			t.Logf("seed %d: %d steps in %v", seed, steps, time.Since(start).Round(time.Millisecond))
		})
	}
}

// replayModel replays a written-down op list (a failure's, perhaps edited)
// and shrinks it if it fails.
func replayModel(t *testing.T, v modelVariant, file string) {
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := model.ParseOps(string(text))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	cfg := model.Config{Partition: modelPartition, T0: modelT0, Names: v.names, Quotas: v.quotas, ACLs: v.acls, Trash: v.trash, Snapshots: v.snaps}
	newTarget := func() model.Target { return newVariantTarget(v) }
	if f := model.Replay(cfg, ops, newTarget()); f != nil {
		shrunk, g := model.Shrink(cfg, ops, newTarget)
		t.Fatalf("%v\nshrunk to %d ops (%v):\n%s", f, len(shrunk), g.Signature(), model.FormatOps(shrunk))
	}
	t.Logf("%s: %d ops replayed, no difference", file, len(ops))
}

// engineTarget is the engine in process as a model.Target.
type engineTarget struct {
	e       *Engine
	compact bool // pack every directory after every step
	freeze  int  // if not 0: keep a freeze live, encoded on another goroutine, a new one every freeze steps
	reload  int  // if not 0: replace the engine by one loaded from its checkpoint every reload steps
	trash   bool // the trash on (its days are not in the checkpoint: set again on reload)

	steps  int
	frozen *Frozen
	want   []byte         // the engine's checkpoint at the freeze
	done   <-chan encoded // the frozen view's checkpoint
}

func newEngineTarget(compact bool, freeze int) *engineTarget {
	return &engineTarget{e: New(modelPartition, modelT0), compact: compact, freeze: freeze}
}

// rotateFreeze ends the live freeze, requiring that its checkpoint, encoded
// while the steps since went on, holds the bytes the engine wrote at the
// freeze, and takes a new one.
func (t *engineTarget) rotateFreeze() error {
	if t.frozen != nil {
		r := <-t.done
		t.frozen.Release()
		if r.err != nil {
			return fmt.Errorf("frozen checkpoint: %w", r.err)
		}
		if !bytes.Equal(r.b, t.want) {
			return fmt.Errorf("the frozen checkpoint (%d bytes) differs from the engine's at the freeze (%d bytes)", len(r.b), len(t.want))
		}
	}
	var b bytes.Buffer
	if err := t.e.WriteCheckpoint(&b); err != nil {
		return err
	}
	t.want = b.Bytes()
	t.frozen = t.e.Freeze()
	t.done = encodeAsync(t.frozen)
	return nil
}

func (t *engineTarget) Apply(op model.Op, now int64) (model.Result, error) {
	return model.Apply(engineNS{t.e}, op, now)
}

// Check packs every directory if asked to, then runs the engine's own
// consistency check.
func (t *engineTarget) Check() error {
	if t.compact {
		if err := t.packAll(); err != nil {
			return err
		}
	}
	if err := t.e.Check(); err != nil {
		return fmt.Errorf("engine Check: %w", err)
	}
	if t.steps++; t.freeze > 0 && t.steps%t.freeze == 1 {
		return t.rotateFreeze()
	}
	if t.reload > 0 && t.steps%t.reload == 0 {
		var b bytes.Buffer
		if err := t.e.WriteCheckpoint(&b); err != nil {
			return err
		}
		e, err := Load(&b)
		if err != nil {
			return fmt.Errorf("reload: %w", err)
		}
		if t.trash {
			e.SetTrashDays(1)
		}
		t.e = e
	}
	return nil
}

// newVariantTarget is the engine target variant v asks for.
func newVariantTarget(v modelVariant) *engineTarget {
	t := newEngineTarget(v.compact, v.freeze)
	t.reload = v.reload
	if t.trash = v.trash; v.trash {
		t.e.SetTrashDays(1)
	}
	return t
}

// packAll runs the idle sweep until it has nothing left to do: every
// directory with entries is packed by then, and must still be.
func (t *engineTarget) packAll() error {
	for t.e.CompactIdle(1<<20) > 0 {
	}
	for ino, n := range t.e.st.all() {
		if x := t.e.st.extraOf(n); n.isDir() && x.dir.live > 0 && x.dir.packed == nil {
			return fmt.Errorf("dir %d with %d entries not packed after the sweep", ino, x.dir.live)
		}
	}
	return nil
}

// ---- conversions ----

func toCred(c model.Cred) Cred { return Cred{UID: c.UID, GID: c.GID, Groups: c.Groups} }

func fromCred(c Cred) model.Cred { return model.Cred{UID: c.UID, GID: c.GID, Groups: c.Groups} }

func fromAttr(a Attr) model.Attr {
	return model.Attr{Ino: model.Ino(a.Ino), Mode: a.Mode, UID: a.UID, GID: a.GID, Nlink: a.Nlink, Size: a.Size,
		Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime, Rdev: a.Rdev}
}

func toAttr(a model.Attr) Attr {
	return Attr{Ino: Ino(a.Ino), Mode: a.Mode, UID: a.UID, GID: a.GID, Nlink: a.Nlink, Size: a.Size,
		Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime, Rdev: a.Rdev}
}

func fromDirents(ents []Dirent) []model.Dirent {
	if ents == nil {
		return nil
	}
	out := make([]model.Dirent, len(ents))
	for i, e := range ents {
		out[i] = model.Dirent{Name: e.Name, Ino: model.Ino(e.Ino), Type: e.Type}
		if e.Attr != (Attr{}) {
			out[i].Attr = fromAttr(e.Attr)
		}
	}
	return out
}

func toDirents(ents []model.Dirent) []Dirent {
	if ents == nil {
		return nil
	}
	out := make([]Dirent, len(ents))
	for i, e := range ents {
		out[i] = Dirent{Name: e.Name, Ino: Ino(e.Ino), Type: e.Type}
		if e.Attr != (model.Attr{}) {
			out[i].Attr = toAttr(e.Attr)
		}
	}
	return out
}

func fromSetAttr(s SetAttr) model.SetAttr {
	return model.SetAttr{Valid: s.Valid, Mode: s.Mode, UID: s.UID, GID: s.GID, Size: s.Size, Atime: s.Atime, Mtime: s.Mtime}
}

func toSetAttr(s model.SetAttr) SetAttr {
	return SetAttr{Valid: s.Valid, Mode: s.Mode, UID: s.UID, GID: s.GID, Size: s.Size, Atime: s.Atime, Mtime: s.Mtime}
}

// engineNS is the engine with the model's types.
type engineNS struct{ e *Engine }

var _ model.Namespace = engineNS{}

func modelAttr(a Attr, err error) (model.Attr, error) { return fromAttr(a), err }

func (n engineNS) Root() model.Ino { return model.Ino(n.e.Root()) }
func (n engineNS) Resolve(c model.Cred, path string, follow bool) (model.Attr, error) {
	return modelAttr(n.e.Resolve(toCred(c), path, follow))
}
func (n engineNS) ResolveParent(c model.Cred, path string) (model.Ino, string, error) {
	p, name, err := n.e.ResolveParent(toCred(c), path)
	return model.Ino(p), name, err
}
func (n engineNS) Lookup(c model.Cred, parent model.Ino, name string) (model.Attr, error) {
	return modelAttr(n.e.Lookup(toCred(c), Ino(parent), name))
}
func (n engineNS) GetAttr(ino model.Ino) (model.Attr, error) { return modelAttr(n.e.GetAttr(Ino(ino))) }
func (n engineNS) Readlink(ino model.Ino) (string, error)    { return n.e.Readlink(Ino(ino)) }
func (n engineNS) Readdir(c model.Cred, ino model.Ino, cursor string, limit int, withAttrs bool) ([]model.Dirent, string, bool, error) {
	ents, next, eof, err := n.e.Readdir(toCred(c), Ino(ino), cursor, limit, withAttrs)
	return fromDirents(ents), next, eof, err
}
func (n engineNS) Statfs() model.Statfs {
	s := n.e.Statfs()
	return model.Statfs{UsedBytes: s.UsedBytes, UsedInodes: s.UsedInodes, BlockSize: s.BlockSize, MaxName: s.MaxName}
}
func (n engineNS) Summary(c model.Cred, ino model.Ino) (model.Summary, error) {
	s, err := n.e.Summary(toCred(c), Ino(ino))
	return model.Summary{Dirs: s.Dirs, Files: s.Files, Bytes: s.Bytes}, err
}
func (n engineNS) Mkdir(c model.Cred, parent model.Ino, name string, mode uint32, now int64) (model.Attr, error) {
	return modelAttr(n.e.Mkdir(toCred(c), Ino(parent), name, mode, now))
}
func (n engineNS) Mknod(c model.Cred, parent model.Ino, name string, mode, rdev uint32, now int64) (model.Attr, error) {
	return modelAttr(n.e.Mknod(toCred(c), Ino(parent), name, mode, rdev, now))
}
func (n engineNS) Symlink(c model.Cred, parent model.Ino, name, target string, now int64) (model.Attr, error) {
	return modelAttr(n.e.Symlink(toCred(c), Ino(parent), name, target, now))
}
func (n engineNS) Link(c model.Cred, ino, newParent model.Ino, newName string, now int64) (model.Attr, error) {
	return modelAttr(n.e.Link(toCred(c), Ino(ino), Ino(newParent), newName, now))
}
func (n engineNS) Unlink(c model.Cred, parent model.Ino, name string, now int64) error {
	return n.e.Unlink(toCred(c), Ino(parent), name, now)
}
func (n engineNS) Rmdir(c model.Cred, parent model.Ino, name string, now int64) error {
	return n.e.Rmdir(toCred(c), Ino(parent), name, now)
}
func (n engineNS) Rename(c model.Cred, parent model.Ino, name string, newParent model.Ino, newName string, flags uint32, now int64) error {
	return n.e.Rename(toCred(c), Ino(parent), name, Ino(newParent), newName, flags, now)
}
func (n engineNS) SetAttr(c model.Cred, ino model.Ino, s model.SetAttr, now int64) (model.Attr, error) {
	return modelAttr(n.e.SetAttr(toCred(c), Ino(ino), toSetAttr(s), now))
}
func (n engineNS) GetXattr(c model.Cred, ino model.Ino, name string) ([]byte, error) {
	return n.e.GetXattr(toCred(c), Ino(ino), name)
}
func (n engineNS) SetXattr(c model.Cred, ino model.Ino, name string, value []byte, flags uint32, now int64) error {
	return n.e.SetXattr(toCred(c), Ino(ino), name, value, flags, now)
}
func (n engineNS) ListXattr(c model.Cred, ino model.Ino) ([]string, error) {
	return n.e.ListXattr(toCred(c), Ino(ino))
}
func (n engineNS) RemoveXattr(c model.Cred, ino model.Ino, name string, now int64) error {
	return n.e.RemoveXattr(toCred(c), Ino(ino), name, now)
}

// oracleNS is the model with the engine's types, for the tests that drive
// both through the namespace interface (the fuzz tests).
type oracleNS struct{ o *model.Oracle }

var _ namespace = oracleNS{}

func newModel(p uint16, now int64) oracleNS { return oracleNS{model.New(p, now)} }

func attrIn(a model.Attr, err error) (Attr, error) { return toAttr(a), err }

func (m oracleNS) Root() Ino { return Ino(m.o.Root()) }
func (m oracleNS) Resolve(c Cred, path string, follow bool) (Attr, error) {
	return attrIn(m.o.Resolve(fromCred(c), path, follow))
}
func (m oracleNS) ResolveParent(c Cred, path string) (Ino, string, error) {
	p, name, err := m.o.ResolveParent(fromCred(c), path)
	return Ino(p), name, err
}
func (m oracleNS) Lookup(c Cred, parent Ino, name string) (Attr, error) {
	return attrIn(m.o.Lookup(fromCred(c), model.Ino(parent), name))
}
func (m oracleNS) GetAttr(ino Ino) (Attr, error)    { return attrIn(m.o.GetAttr(model.Ino(ino))) }
func (m oracleNS) Readlink(ino Ino) (string, error) { return m.o.Readlink(model.Ino(ino)) }
func (m oracleNS) Readdir(c Cred, ino Ino, cursor string, limit int, withAttrs bool) ([]Dirent, string, bool, error) {
	ents, next, eof, err := m.o.Readdir(fromCred(c), model.Ino(ino), cursor, limit, withAttrs)
	return toDirents(ents), next, eof, err
}
func (m oracleNS) Statfs() Statfs {
	s := m.o.Statfs()
	return Statfs{UsedBytes: s.UsedBytes, UsedInodes: s.UsedInodes, BlockSize: s.BlockSize, MaxName: s.MaxName}
}
func (m oracleNS) Summary(c Cred, ino Ino) (Summary, error) {
	s, err := m.o.Summary(fromCred(c), model.Ino(ino))
	return Summary{Dirs: s.Dirs, Files: s.Files, Bytes: s.Bytes}, err
}
func (m oracleNS) Mkdir(c Cred, parent Ino, name string, mode uint32, now int64) (Attr, error) {
	return attrIn(m.o.Mkdir(fromCred(c), model.Ino(parent), name, mode, now))
}
func (m oracleNS) Mknod(c Cred, parent Ino, name string, mode, rdev uint32, now int64) (Attr, error) {
	return attrIn(m.o.Mknod(fromCred(c), model.Ino(parent), name, mode, rdev, now))
}
func (m oracleNS) Symlink(c Cred, parent Ino, name, target string, now int64) (Attr, error) {
	return attrIn(m.o.Symlink(fromCred(c), model.Ino(parent), name, target, now))
}
func (m oracleNS) Link(c Cred, ino, newParent Ino, newName string, now int64) (Attr, error) {
	return attrIn(m.o.Link(fromCred(c), model.Ino(ino), model.Ino(newParent), newName, now))
}
func (m oracleNS) Unlink(c Cred, parent Ino, name string, now int64) error {
	return m.o.Unlink(fromCred(c), model.Ino(parent), name, now)
}
func (m oracleNS) Rmdir(c Cred, parent Ino, name string, now int64) error {
	return m.o.Rmdir(fromCred(c), model.Ino(parent), name, now)
}
func (m oracleNS) Rename(c Cred, parent Ino, name string, newParent Ino, newName string, flags uint32, now int64) error {
	return m.o.Rename(fromCred(c), model.Ino(parent), name, model.Ino(newParent), newName, flags, now)
}
func (m oracleNS) SetAttr(c Cred, ino Ino, s SetAttr, now int64) (Attr, error) {
	return attrIn(m.o.SetAttr(fromCred(c), model.Ino(ino), fromSetAttr(s), now))
}
func (m oracleNS) GetXattr(c Cred, ino Ino, name string) ([]byte, error) {
	return m.o.GetXattr(fromCred(c), model.Ino(ino), name)
}
func (m oracleNS) SetXattr(c Cred, ino Ino, name string, value []byte, flags uint32, now int64) error {
	return m.o.SetXattr(fromCred(c), model.Ino(ino), name, value, flags, now)
}
func (m oracleNS) ListXattr(c Cred, ino Ino) ([]string, error) {
	return m.o.ListXattr(fromCred(c), model.Ino(ino))
}
func (m oracleNS) RemoveXattr(c Cred, ino Ino, name string, now int64) error {
	return m.o.RemoveXattr(fromCred(c), model.Ino(ino), name, now)
}

// abbrev abbreviates a path for messages: a long component becomes <c*N>, a
// long run of slashes </*N>.
func abbrev(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); {
		j := i
		for j < len(path) && path[j] == path[i] {
			j++
		}
		if j-i > 16 {
			fmt.Fprintf(&b, "<%c*%d>", path[i], j-i)
		} else {
			b.WriteString(path[i:j])
		}
		i = j
	}
	return b.String()
}

func isDotName(name string) bool { return name == "." || name == ".." }

var _ model.QuotaNamespace = engineNS{}

func (n engineNS) SetQuota(c model.Cred, dir model.Ino, maxFiles, maxBytes uint64) (model.Quota, error) {
	q, err := n.e.SetQuota(toCred(c), Ino(dir), maxFiles, maxBytes)
	return modelQuota(q), err
}
func (n engineNS) GetQuota(dir model.Ino) (model.Quota, error) {
	q, err := n.e.GetQuota(Ino(dir))
	return modelQuota(q), err
}
func (n engineNS) RemoveQuota(c model.Cred, dir model.Ino) error {
	return n.e.RemoveQuota(toCred(c), Ino(dir))
}

func modelQuota(q Quota) model.Quota {
	return model.Quota{MaxFiles: q.MaxFiles, MaxBytes: q.MaxBytes, Files: q.Files, Bytes: q.Bytes}
}
