package engine

import "github.com/canopyfs/canopy/internal/model"

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
