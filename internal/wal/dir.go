package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/canopyfs/canopy/internal/vfs"
)

// ensureDir creates dir and any missing parents, and makes their entries
// durable by syncing the directory each one was created in. It does nothing
// if dir exists.
func ensureDir(fsys vfs.FS, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; {
		_, err := fsys.ReadDir(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("read dir %s: %w", d, err)
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return fmt.Errorf("create dir %s: %w", dir, err)
	}
	// Deepest first: by the time a parent's entry is durable, everything
	// below it is.
	for _, d := range missing {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return fmt.Errorf("sync dir %s: %w", filepath.Dir(d), err)
		}
	}
	return nil
}
