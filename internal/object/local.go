package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// local keeps each object as a regular file at <root>/<key>.
type local struct {
	root string
	// durable holds directories under root whose entry is known to have
	// reached stable storage (their parent was fsynced after they were
	// created or first seen by this process).
	durable sync.Map
	direct  directState
	// fsSync shares one file-system sync among concurrent Sync calls.
	fsSync syncGroup
}

// NewLocal returns a Store that keeps objects as files under dir, which is
// created if missing. The object "a/b/c" is the file dir/a/b/c.
//
// Put writes a temporary file next to the target (named ".canopy-tmp-*")
// and renames it over the target, so a reader, and a crash of the process,
// sees either the whole object or none (and at worst a temporary file,
// which is never listed or returned). Durability against a crash of the
// machine is deferred to Sync (the store is a Syncer), which syncs the file
// system once for every object put before it. New directories are fsynced
// into their parents before an object is renamed into them.
//
// Because objects are files, one key cannot be both an object and the
// parent of another ("a" and "a/b"); Put fails for the second of the two.
// Directories are never removed, since keys of the data path reuse them.
func NewLocal(dir string) (Store, error) {
	if dir == "" {
		return nil, errors.New("object: local store needs a directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("object: %s is not a directory", abs)
	}
	if err := syncDir(filepath.Dir(abs)); err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	return &local{root: abs}, nil
}

func (l *local) String() string { return "file://" + filepath.ToSlash(l.root) }

func (l *local) path(key string) string {
	return filepath.Join(l.root, filepath.FromSlash(key))
}

func (l *local) Put(ctx context.Context, key string, data []byte) error {
	if err := checkKey("put", key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &fs.PathError{Op: "put", Path: key, Err: err}
	}
	if err := l.put(key, data); err != nil {
		return &fs.PathError{Op: "put", Path: key, Err: err}
	}
	return nil
}

func (l *local) put(key string, data []byte) error {
	target := l.path(key)
	dir := filepath.Dir(target)
	if err := l.ensureDir(dir); err != nil {
		return err
	}
	f, err := createTemp(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// The directory vanished under us (removed by hand): make it again.
		l.durable.Delete(dir)
		if err = l.ensureDir(dir); err == nil {
			f, err = createTemp(dir)
		}
	}
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := l.direct.writeObject(f, data); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		ok = true // already closed and removed
		return err
	}
	ok = true
	return nil
}

// Sync makes every object put so far durable with one sync of the file
// system that holds the store (syncfs(2)): one journal commit and one disk
// cache flush for all of them, instead of two of each per object. Calls at
// the same time share a sync that started after each of them began.
func (l *local) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.fsSync.do(func() error {
		d, err := os.Open(l.root)
		if err != nil {
			return fmt.Errorf("object: sync: %w", err)
		}
		defer d.Close()
		if err := unix.Syncfs(int(d.Fd())); err != nil {
			return fmt.Errorf("object: sync %s: %w", l.root, err)
		}
		return nil
	})
}

// createTemp creates a new temporary file in dir, readable like an object.
func createTemp(dir string) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, tempPrefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "createtemp", Path: dir, Err: fs.ErrExist}
}

// ensureDir makes dir (under root) exist and makes its entry, and those of
// its ancestors up to root, durable.
func (l *local) ensureDir(dir string) error {
	if dir == l.root {
		return nil
	}
	if _, ok := l.durable.Load(dir); ok {
		return nil
	}
	if !strings.HasPrefix(dir, l.root+string(filepath.Separator)) {
		return fmt.Errorf("directory %s is outside the store", dir)
	}
	parent := filepath.Dir(dir)
	if err := l.ensureDir(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, serr := os.Stat(dir)
		if serr != nil {
			return serr
		}
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
	}
	// Whether created now or found (perhaps made by a concurrent Put that has
	// not synced it yet), sync the parent once so the entry is on disk.
	if err := syncDir(parent); err != nil {
		return err
	}
	l.durable.Store(dir, struct{}{})
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// missing reports whether err means the file at a key's path does not exist
// (also when a parent element is a regular file).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// localBody is the reader returned by Get: a section of an open file.
type localBody struct {
	*io.SectionReader
	f *os.File
}

func (b *localBody) Close() error { return b.f.Close() }

func (l *local) Get(ctx context.Context, key string, off, limit int64) (io.ReadCloser, error) {
	if err := checkKey("get", key); err != nil {
		return nil, err
	}
	if err := checkRange(key, off); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &fs.PathError{Op: "get", Path: key, Err: err}
	}
	f, err := os.Open(l.path(key))
	if err != nil {
		if missing(err) {
			return nil, notFound("get", key)
		}
		return nil, &fs.PathError{Op: "get", Path: key, Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "get", Path: key, Err: err}
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, notFound("get", key)
	}
	size := fi.Size()
	n := int64(0)
	if off < size {
		n = size - off
		if limit >= 0 && limit < n {
			n = limit
		}
	}
	return &localBody{SectionReader: io.NewSectionReader(f, min(off, size), n), f: f}, nil
}

func (l *local) Head(ctx context.Context, key string) (Info, error) {
	if err := checkKey("head", key); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, &fs.PathError{Op: "head", Path: key, Err: err}
	}
	fi, err := os.Stat(l.path(key))
	if err != nil {
		if missing(err) {
			return Info{}, notFound("head", key)
		}
		return Info{}, &fs.PathError{Op: "head", Path: key, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return Info{}, notFound("head", key)
	}
	return Info{Key: key, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

func (l *local) Delete(ctx context.Context, key string) error {
	if err := checkKey("delete", key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &fs.PathError{Op: "delete", Path: key, Err: err}
	}
	p := l.path(key)
	fi, err := os.Lstat(p)
	if err != nil {
		if missing(err) {
			return nil
		}
		return &fs.PathError{Op: "delete", Path: key, Err: err}
	}
	if fi.IsDir() {
		return nil // a directory is not an object
	}
	if err := os.Remove(p); err != nil && !missing(err) {
		return &fs.PathError{Op: "delete", Path: key, Err: err}
	}
	return nil
}

// List walks the tree depth first. Within a directory, entries are visited
// in the order of the keys below them: a directory "d" is ordered as "d/",
// so that, for example, the object "a-b" comes before the objects under "a/"
// as in byte order of whole keys. Subtrees that cannot hold a matching key
// are skipped.
func (l *local) List(ctx context.Context, prefix, startAfter string, limit int) ([]Info, error) {
	out := []Info{}
	err := l.walk(ctx, l.root, "", prefix, startAfter, limit, &out)
	if err != nil && err != errStopList {
		return nil, &fs.PathError{Op: "list", Path: prefix, Err: err}
	}
	return out, nil
}

type dirEntry struct {
	name  string
	order string // name, plus "/" for a directory
	dir   bool
}

func (l *local) walk(ctx context.Context, dir, base, prefix, startAfter string, limit int, out *[]Info) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if dir != l.root && missing(err) {
			return nil // removed by hand while listing
		}
		return err
	}
	list := make([]dirEntry, 0, len(ents))
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, tempPrefix) {
			continue
		}
		switch {
		case e.IsDir():
			list = append(list, dirEntry{name: name, order: name + "/", dir: true})
		case e.Type().IsRegular():
			list = append(list, dirEntry{name: name, order: name})
		}
	}
	slices.SortFunc(list, func(a, b dirEntry) int { return strings.Compare(a.order, b.order) })
	for _, e := range list {
		key := base + e.order
		if key > prefix && !strings.HasPrefix(key, prefix) {
			// Keys with the prefix form one contiguous run in key order,
			// and everything from here on sorts after it.
			return errStopList
		}
		if e.dir {
			if !strings.HasPrefix(key, prefix) && !strings.HasPrefix(prefix, key) {
				continue
			}
			if startAfter > key && !strings.HasPrefix(startAfter, key) {
				continue // every key below sorts before startAfter
			}
			if err := l.walk(ctx, filepath.Join(dir, e.name), key, prefix, startAfter, limit, out); err != nil {
				return err
			}
			continue
		}
		if !strings.HasPrefix(key, prefix) || key <= startAfter || !validKey(key) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, e.name))
		if err != nil {
			if missing(err) {
				continue // deleted while listing
			}
			return err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		*out = append(*out, Info{Key: key, Size: fi.Size(), Modified: fi.ModTime()})
		if limit > 0 && len(*out) >= limit {
			return errStopList
		}
	}
	return nil
}
