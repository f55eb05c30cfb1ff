package engine

import (
	"testing"

	"github.com/canopyfs/canopy/internal/model"
)

// The engine's clones and snapshots as the model's SnapshotNamespace, for
// the snapshot variants of TestModel.

var _ model.SnapshotNamespace = engineNS{}

func (n engineNS) Clone(c model.Cred, src, dstParent model.Ino, name string, now int64) (model.Attr, error) {
	return modelAttr(n.e.Clone(toCred(c), Ino(src), Ino(dstParent), name, now))
}

func modelSnapshot(s SnapshotInfo) model.SnapshotInfo {
	return model.SnapshotInfo{Name: s.Name, Dir: model.Ino(s.Dir), Ino: model.Ino(s.Ino), Created: s.Created, Nodes: s.Nodes, Bytes: s.Bytes}
}

func (n engineNS) SnapshotCreate(c model.Cred, dir model.Ino, name string, now int64) (model.SnapshotInfo, error) {
	s, err := n.e.SnapshotCreate(toCred(c), Ino(dir), name, now)
	return modelSnapshot(s), err
}

func (n engineNS) SnapshotList(dir model.Ino) ([]model.SnapshotInfo, error) {
	list, err := n.e.SnapshotList(Ino(dir))
	var out []model.SnapshotInfo
	for _, s := range list {
		out = append(out, modelSnapshot(s))
	}
	return out, err
}

func (n engineNS) SnapshotRemove(c model.Cred, dir model.Ino, name string, now int64) error {
	return n.e.SnapshotRemove(toCred(c), Ino(dir), name, now)
}

func (n engineNS) SnapshotDiff(c model.Cred, dir model.Ino, from, to string) ([]model.SnapshotChange, bool, error) {
	changes, truncated, err := n.e.SnapshotDiff(toCred(c), Ino(dir), from, to)
	var out []model.SnapshotChange
	for _, ch := range changes {
		out = append(out, model.SnapshotChange{Op: ch.Op, Path: ch.Path, Type: ch.Type})
	}
	return out, truncated, err
}

// snapshotScript is a written-down run through the snapshot rules: a
// snapshot and changes after it, reads of the old contents through
// .snapshot, the refusals there, clones out of it and into their own
// source, a clone over a quota, and the area going with the last
// snapshot.
const snapshotScript = `
setattr as=root path="/" follow set=mode set.mode=0777
mkdir as=1000:1000 path="/a" mode=0755
mknod as=1000:1000 path="/a/f" mode=0104755
setattr as=1000:1000 path="/a/f" follow set=size set.size=100
link as=1000:1000 path="/a/f" path2="/a/g"
mkdir as=1000:1000 path="/a/d" mode=0700
mknod as=1000:1000 path="/a/d/x" mode=0100600
snap.create as=1001:1001 path="/a" name="s1"
snap.create as=1000:1000 path="/a" name="s1"
snap.create as=1000:1000 path="/a" name="s1"
snap.create as=root path="/" name="all"
snap.ls as=root path="/a"
setattr as=1000:1000 path="/a/f" follow set=size set.size=7
unlink as=1000:1000 path="/a/g"
resolve as=1000:1000 path="/a/.snapshot/s1/f"
resolve as=1000:1000 path="/a/.snapshot/s1/g"
readdir as=1000:1000 path="/a/.snapshot/s1" attrs
readdir as=1001:1001 path="/a/.snapshot/s1/d"
snap.diff as=1000:1000 path="/a" name="s1"
snap.diff as=root path="/" name="all"
mknod as=root path="/a/.snapshot/s1/x" mode=0100644
unlink as=root path="/a/.snapshot/s1/f"
rename as=root path="/a/.snapshot/s1/f" path2="/a/x"
rename as=root path="/a/f" path2="/a/.snapshot/s1/x"
setattr as=root path="/a/.snapshot/s1/f" follow set=mode set.mode=0777
setxattr as=root path="/a/.snapshot/s1" follow name="user.a" value="v"
link as=root path="/a/.snapshot/s1/f" path2="/a/x"
rmdir as=root path="/a/.snapshot/s1"
quota.set as=root path="/a/.snapshot" files=9
snap.create as=root path="/a/.snapshot/s1" name="s"
clone as=root path="/a/f" path2="/a/.snapshot/s1/x"
mkdir as=1000:1000 path="/a/.snapshot" mode=0755
mkdir as=root path="/e" mode=0755
rename as=root path="/e" path2="/a"
clone as=1001:1001 path="/a/.snapshot/s1/f" path2="/c"
clone as=1001:1001 path="/a/.snapshot/s1" path2="/c2"
clone as=1000:1000 path="/a/.snapshot/s1" path2="/c3"
setattr as=1001:1001 path="/c" follow set=mode set.mode=0600
clone as=root path="/a" path2="/a/self"
resolve as=root path="/a/self/self"
mkdir as=root path="/q" mode=0777
quota.set as=root path="/q" files=2
clone as=root path="/a" path2="/q/a"
clone as=root path="/" path2="/q/all"
snap.rm as=1001:1001 path="/a" name="s1"
snap.rm as=1000:1000 path="/a" name="s1"
snap.rm as=root path="/" name="all"
lookup as=root path="/" name=".snapshots"
mkdir as=root path="/.snapshots" mode=0755
`

// TestModelSnapshotScript replays snapshotScript against the engine and
// the model: every result and the trees between agree.
func TestModelSnapshotScript(t *testing.T) {
	ops, err := model.ParseOps(snapshotScript)
	if err != nil {
		t.Fatal(err)
	}
	v := modelVariant{names: model.Names, snaps: true, quotas: true}
	cfg := model.Config{Partition: modelPartition, T0: modelT0, TreeEvery: 1, Quotas: true, Snapshots: true}
	if f := model.Replay(cfg, ops, newVariantTarget(v)); f != nil {
		t.Fatal(f)
	}
}
