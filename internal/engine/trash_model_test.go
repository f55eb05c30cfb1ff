package engine

import (
	"errors"
	"syscall"

	"github.com/canopyfs/canopy/internal/model"
)

// The engine's trash as the model's TrashNamespace, for the trash
// variants of TestModel. A restore of what the trash does not hold is
// ErrNotInTrash to the engine and ENOENT to the model.

var _ model.TrashNamespace = engineNS{}

func trashErrno(err error) error {
	if errors.Is(err, ErrNotInTrash) {
		return syscall.ENOENT
	}
	return err
}

func (n engineNS) TrashList() []model.TrashEntry {
	var out []model.TrashEntry
	for _, t := range n.e.TrashList() {
		out = append(out, model.TrashEntry{Hour: t.Hour, Name: t.Name, Ino: model.Ino(t.Ino), Parent: model.Ino(t.Parent),
			Orig: t.Orig, Path: t.Path, Files: t.Files, Bytes: t.Bytes})
	}
	return out
}

func (n engineNS) TrashRestore(c model.Cred, hour, name string, now int64) ([]string, error) {
	paths, err := n.e.TrashRestore(toCred(c), hour, name, now)
	return paths, trashErrno(err)
}

func (n engineNS) TrashRestoreHour(c model.Cred, hour string, now int64) ([]string, error) {
	paths, err := n.e.TrashRestoreHour(toCred(c), hour, now)
	if err != nil && errors.Is(err, ErrNotInTrash) {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			err = syscall.ENOENT
		}
	}
	return paths, err
}

func (n engineNS) TrashPurge(c model.Cred, before, now int64) (uint64, uint64, error) {
	return n.e.TrashPurge(toCred(c), before, now)
}
