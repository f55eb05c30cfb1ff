package vfs

import (
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// MemFS is an in-memory FS that remembers what a real file system would
// have made durable, so that a test can simulate a machine crash with Crash.
//
// Names are resolved against the root of the MemFS: "a/b", "/a/b" and
// "./a/b" name the same file. The root directory always exists.
//
// MemFS is safe for concurrent use: one mutex guards the whole tree and
// every open file's state.
type MemFS struct {
	mu   sync.Mutex
	root *memNode // guarded by mu, as is every node reachable from it
}

// memNode is a file or a directory: an inode. A node may outlive its
// directory entries while a File still refers to it.
type memNode struct {
	isDir bool

	// Directories.
	children       map[string]*memNode // current entries
	syncedChildren map[string]*memNode // entries as of the last SyncDir

	// Files. data[:dirtyFrom] equals synced[:dirtyFrom], and dirtyFrom is
	// at most len(synced): everything from dirtyFrom on may differ from
	// what was last synced.
	data      []byte // current contents
	synced    []byte // contents as of the last Sync
	dirtyFrom int
	shrunk    bool // cut below its synced length since the last Sync
}

var _ FS = (*MemFS)(nil)

// NewMem returns an empty MemFS.
func NewMem() *MemFS {
	return &MemFS{root: newDirNode()}
}

func newDirNode() *memNode {
	return &memNode{
		isDir:          true,
		children:       make(map[string]*memNode),
		syncedChildren: make(map[string]*memNode),
	}
}

// sync makes the file's current contents its durable contents.
func (n *memNode) sync() {
	n.synced = append(n.synced[:n.dirtyFrom], n.data[n.dirtyFrom:]...)
	n.dirtyFrom = len(n.data)
	n.shrunk = false
}

// writeAt writes p at offset off, extending the file with zeros if off is
// past its end.
func (n *memNode) writeAt(off int, p []byte) {
	if off > len(n.data) {
		n.resize(off)
	}
	n.dirtyFrom = min(n.dirtyFrom, off)
	k := copy(n.data[off:], p)
	n.data = append(n.data, p[k:]...)
}

// resize truncates or zero-extends the file to size bytes.
func (n *memNode) resize(size int) {
	old := len(n.data)
	if size <= old {
		n.data = n.data[:size]
		n.dirtyFrom = min(n.dirtyFrom, size)
		n.shrunk = n.shrunk || size < len(n.synced)
		return
	}
	n.data = append(n.data, make([]byte, size-old)...)
	n.dirtyFrom = min(n.dirtyFrom, old)
}

// splitPath returns the components of name below the root; the root itself
// has none.
func splitPath(name string) []string {
	p := path.Clean("/" + name)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// lookup returns the node named by name. m.mu must be held.
func (m *MemFS) lookup(op, name string) (*memNode, error) {
	n := m.root
	for _, part := range splitPath(name) {
		if !n.isDir {
			return nil, pathErr(op, name, syscall.ENOTDIR)
		}
		child, ok := n.children[part]
		if !ok {
			return nil, pathErr(op, name, fs.ErrNotExist)
		}
		n = child
	}
	return n, nil
}

// lookupParent returns the directory that holds, or would hold, name, and
// name's last component. m.mu must be held.
func (m *MemFS) lookupParent(op, name string) (dir *memNode, base string, err error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", pathErr(op, name, syscall.EISDIR) // the root
	}
	dir, err = m.lookup(op, strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !dir.isDir {
		return nil, "", pathErr(op, name, syscall.ENOTDIR)
	}
	return dir, parts[len(parts)-1], nil
}

// lookupFile returns the file named by name. m.mu must be held.
func (m *MemFS) lookupFile(op, name string) (*memNode, error) {
	n, err := m.lookup(op, name)
	if err != nil {
		return nil, err
	}
	if n.isDir {
		return nil, pathErr(op, name, syscall.EISDIR)
	}
	return n, nil
}

// openWrite implements Create (create: make the file, or empty it) and
// OpenWrite (the file must exist, and keeps its contents).
func (m *MemFS) openWrite(op, name string, create bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent(op, name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	switch {
	case !ok && !create:
		return nil, pathErr(op, name, fs.ErrNotExist)
	case !ok:
		n = &memNode{}
		dir.children[base] = n
	case n.isDir:
		return nil, pathErr(op, name, syscall.EISDIR)
	case create:
		n.resize(0)
	}
	return &memFile{fs: m, node: n, name: name, mode: modeWrite}, nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) { return m.openWrite("create", name, true) }

// OpenWrite implements FS.
func (m *MemFS) OpenWrite(name string) (File, error) { return m.openWrite("open", name, false) }

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupFile("open", name)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, node: n, name: name, mode: modeRead}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent("remove", name)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.isDir && len(n.children) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.children, base)
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldDir, oldBase, err := m.lookupParent("rename", oldname)
	if err != nil {
		return err
	}
	n, ok := oldDir.children[oldBase]
	if !ok {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	newDir, newBase, err := m.lookupParent("rename", newname)
	if err != nil {
		return err
	}
	if target, ok := newDir.children[newBase]; ok {
		if target == n {
			return nil
		}
		switch {
		case target.isDir && !n.isDir:
			return pathErr("rename", newname, syscall.EISDIR)
		case !target.isDir && n.isDir:
			return pathErr("rename", newname, syscall.ENOTDIR)
		case target.isDir && len(target.children) > 0:
			return pathErr("rename", newname, syscall.ENOTEMPTY)
		}
	}
	delete(oldDir.children, oldBase)
	newDir.children[newBase] = n
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, part := range splitPath(dir) {
		child, ok := n.children[part]
		if !ok {
			child = newDirNode()
			n.children[part] = child
		} else if !child.isDir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		n = child
	}
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("readdir", dir)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, pathErr("readdir", dir, syscall.ENOTDIR)
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("sync", dir)
	if err != nil {
		return err
	}
	if !n.isDir {
		return pathErr("sync", dir, syscall.ENOTDIR)
	}
	n.syncedChildren = maps.Clone(n.children)
	return nil
}

// Size implements FS.
func (m *MemFS) Size(name string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupFile("stat", name)
	if err != nil {
		return 0, err
	}
	return int64(len(n.data)), nil
}

// Truncate implements FS.
func (m *MemFS) Truncate(name string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupFile("truncate", name)
	if err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", name, syscall.EINVAL)
	}
	n.resize(int(size))
	return nil
}
