package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"

	"github.com/canopyfs/canopy/client"
)

// listPage is the page size of the listings cleanup makes.
const listPage = 1024

// listDir lists directory dir page by page, calling fn for every entry,
// and returns how many entries it saw.
func listDir(ctx context.Context, c *client.Client, dir string, page uint32, attrs bool, fn func(*client.DirEntry)) (int, error) {
	n, cursor := 0, ""
	for {
		ents, next, eof, err := c.ReadDirPage(ctx, dir, cursor, page, attrs)
		if err != nil {
			return n, err
		}
		n += len(ents)
		if fn != nil {
			for _, e := range ents {
				fn(e)
			}
		}
		if eof {
			return n, nil
		}
		if len(ents) == 0 || next == cursor {
			return n, fmt.Errorf("readdir %s: page after %q made no progress", dir, cursor)
		}
		cursor = next
	}
}

// removeTree removes root and everything below it with par concurrent
// callers, a level of the tree at a time: list the level's directories,
// unlink the files found, descend, and remove the directories deepest
// first. A root that does not exist is not an error.
func removeTree(ctx context.Context, cs Conns, root string, par int) error {
	if _, err := cs.For(0).Lstat(ctx, root); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("remove %s: %w", root, err)
	}
	var levels [][]string
	for level := []string{root}; len(level) > 0; {
		levels = append(levels, level)
		var mu sync.Mutex
		var files, subdirs []string
		err := stripe(len(level), par, func(g, i int) error {
			var fl, dl []string
			_, err := listDir(ctx, cs.For(g), level[i], listPage, false, func(e *client.DirEntry) {
				p := path.Join(level[i], e.Name())
				if e.IsDir() {
					dl = append(dl, p)
				} else {
					fl = append(fl, p)
				}
			})
			mu.Lock()
			files, subdirs = append(files, fl...), append(subdirs, dl...)
			mu.Unlock()
			return ignoreNotExist(err)
		})
		if err != nil {
			return fmt.Errorf("remove %s: %w", root, err)
		}
		err = stripe(len(files), par, func(g, i int) error {
			return ignoreNotExist(cs.For(g).Unlink(ctx, files[i]))
		})
		if err != nil {
			return fmt.Errorf("remove %s: %w", root, err)
		}
		level = subdirs
	}
	for i := len(levels) - 1; i >= 0; i-- {
		dirs := levels[i]
		err := stripe(len(dirs), par, func(g, j int) error {
			return ignoreNotExist(cs.For(g).Rmdir(ctx, dirs[j]))
		})
		if err != nil {
			return fmt.Errorf("remove %s: %w", root, err)
		}
	}
	return nil
}

func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
