package client

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
)

// FS is the namespace below a directory as an io/fs file system: it
// implements fs.FS, fs.StatFS, fs.ReadDirFS and fs.ReadFileFS, so the
// standard library's walkers, globbing and testing/fstest work on it.
// Names are slash-separated and relative (fs.ValidPath); "." is the
// directory itself. Every call uses the context FS was made with.
type FS struct {
	c    *Client
	ctx  context.Context
	root string
}

var (
	_ fs.StatFS     = (*FS)(nil)
	_ fs.ReadDirFS  = (*FS)(nil)
	_ fs.ReadFileFS = (*FS)(nil)
)

// FS returns the file system below directory root (an absolute path).
func (c *Client) FS(ctx context.Context, root string) *FS {
	return &FS{c: c, ctx: ctx, root: path.Clean("/" + root)}
}

// full maps an fs name to a Canopy path, rejecting invalid names.
func (f *FS) full(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return path.Join(f.root, name), nil
}

// fsErr gives err the fs name instead of the Canopy path.
func fsErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: errnoOf(err)}
}

// Open opens name for reading.
func (f *FS) Open(name string) (fs.File, error) {
	p, err := f.full("open", name)
	if err != nil {
		return nil, err
	}
	file, err := f.c.Open(f.ctx, p)
	if err != nil {
		return nil, fsErr("open", name, err)
	}
	file.name = name
	return file, nil
}

// Stat returns the attributes of name, following symlinks.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	p, err := f.full("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := f.c.Stat(f.ctx, p)
	if err != nil {
		return nil, fsErr("stat", name, err)
	}
	fi.name = path.Base(name)
	return fi, nil
}

// ReadDir returns the entries of directory name sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := f.full("readdir", name)
	if err != nil {
		return nil, err
	}
	file, err := f.c.Open(f.ctx, p)
	if err != nil {
		return nil, fsErr("readdir", name, err)
	}
	defer file.Close()
	list, err := file.ReadDir(-1)
	if err != nil {
		return nil, fsErr("readdir", name, err)
	}
	slices.SortFunc(list, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return list, nil
}

// ReadFile returns the contents of file name.
func (f *FS) ReadFile(name string) ([]byte, error) {
	p, err := f.full("readfile", name)
	if err != nil {
		return nil, err
	}
	return readFile(f.ctx, f.c, p, name)
}

// ReadFile returns the contents of file p.
func (c *Client) ReadFile(ctx context.Context, p string) ([]byte, error) {
	return readFile(ctx, c, p, p)
}

func readFile(ctx context.Context, c *Client, p, name string) ([]byte, error) {
	file, err := c.Open(ctx, p)
	if err != nil {
		return nil, fsErr("readfile", name, err)
	}
	defer file.Close()
	if file.dir {
		return nil, fsErr("readfile", name, syscall.EISDIR)
	}
	size, err := file.r.Size(ctx)
	if err != nil {
		return nil, fsErr("readfile", name, err)
	}
	buf := make([]byte, size)
	n, err := file.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fsErr("readfile", name, err)
	}
	return buf[:n], nil
}

// WriteFile writes data to file p, creating it with perm or truncating
// it, and closes it: afterwards every client sees data.
func (c *Client) WriteFile(ctx context.Context, p string, data []byte, perm fs.FileMode) error {
	f, err := c.OpenFile(ctx, p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
