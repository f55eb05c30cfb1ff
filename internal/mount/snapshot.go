package mount

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sort"
	"strings"
	"unsafe"
)

// Snapshot is the compiled, immutable form of one version of a Table. It is
// safe for concurrent use by any number of goroutines without locking.
//
// Each mount prefix is stored as a key with a slash appended ("/a/b"
// becomes "/a/b/"; the root stays "/"), and a path p is looked up as p+"/".
// A key then matches exactly when its prefix ends at a component boundary
// of p: "/a/b/" is a prefix of "/a/b/" and "/a/b/c/" but not of "/a/bc/".
// The keys form a radix tree over bytes (edges carry whole substrings; a
// node branches on the first byte of its children's edges), and a lookup
// walks it once, remembering the deepest key it passed: the longest
// matching prefix.
//
// The tree is serialized into one byte slice, a node's record followed by
// its children's subtrees (depth-first), so that a step of a lookup reads
// one record, usually one or two cache lines, rather than chasing separate
// allocations. A record is:
//
//	uint16 label length L, uint16 child count C, uint32 entry+1 (0: none),
//	L bytes of label (the edge from the parent; empty only at the root),
//	C bytes: the first byte of each child's label, in increasing order,
//	C uint32: the offset of each child's record,
//
// with integers in little-endian order.
type Snapshot struct {
	version uint64
	entries []Entry  // in Table order (by Prefix)
	tree    []byte   // the root's record is at offset 0
	keys    []string // every entry's key, sorted; for Children
	keyEnt  []int32  // keyEnt[i] is the entry of keys[i]
	groups  []group  // scratch space of Compile
}

// group is a run of sorted keys keys[lo:hi] that share their bytes up to
// end: the keys below one child of a node.
type group struct{ lo, hi, end int }

const recordHeader = 8

// Compile checks t (see Table.Validate) and compiles it into a Snapshot.
// The snapshot keeps its own copy of the entries; t may be reused.
func Compile(t Table) (*Snapshot, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	s := &Snapshot{
		version: t.Version,
		entries: append([]Entry(nil), t.Entries...),
		keys:    make([]string, len(t.Entries)),
		keyEnt:  make([]int32, len(t.Entries)),
	}
	// The keys live in one buffer: one allocation instead of one per entry.
	size := 0
	for _, e := range s.entries {
		size += len(e.Prefix) + 1
	}
	buf := make([]byte, 0, size)
	order := make([]int32, len(t.Entries))
	for i, e := range s.entries {
		order[i] = int32(i)
		start := len(buf)
		buf = append(buf, e.Prefix...)
		if e.Prefix != "/" {
			buf = append(buf, '/')
		}
		// buf never grows past its capacity, so the bytes stay put, and
		// they are not written again.
		s.keys[i] = unsafe.String(&buf[start], len(buf)-start)
	}
	keys := s.keys
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
	sorted := make([]string, len(order))
	for i, o := range order {
		sorted[i] = keys[o]
		s.keyEnt[i] = o
	}
	s.keys = sorted
	// Labels take at most the bytes of all keys; every node has a header,
	// a first byte and an offset; there are at most twice as many nodes as
	// keys, plus the root.
	s.tree = make([]byte, 0, size+(2*len(sorted)+1)*(recordHeader+5))
	s.build("", 0, 0, len(sorted))
	s.groups = nil
	return s, nil
}

// build appends the record of the node reached by the edge label, which
// stands for the first depth bytes shared by the sorted keys[lo:hi], and
// then its subtree, and returns the record's offset.
func (s *Snapshot) build(label string, depth, lo, hi int) uint32 {
	entry := uint32(0)
	if lo < hi && len(s.keys[lo]) == depth {
		entry = uint32(s.keyEnt[lo]) + 1
		lo++
	}
	// One child per distinct byte at depth; the keys of each are contiguous.
	// The groups go on a scratch stack shared by the whole recursion.
	base := len(s.groups)
	for i := lo; i < hi; {
		c := s.keys[i][depth]
		j := i + 1
		for j < hi && s.keys[j][depth] == c {
			j++
		}
		s.groups = append(s.groups, group{i, j, depth + commonPrefix(s.keys[i][depth:], s.keys[j-1][depth:])})
		i = j
	}
	n := len(s.groups) - base
	off := uint32(len(s.tree))
	s.tree = binary.LittleEndian.AppendUint16(s.tree, uint16(len(label)))
	s.tree = binary.LittleEndian.AppendUint16(s.tree, uint16(n))
	s.tree = binary.LittleEndian.AppendUint32(s.tree, entry)
	s.tree = append(s.tree, label...)
	for _, g := range s.groups[base:] {
		s.tree = append(s.tree, s.keys[g.lo][depth])
	}
	offsets := len(s.tree)
	s.tree = append(s.tree, make([]byte, 4*n)...)
	for i := range n {
		g := s.groups[base+i] // by index: the recursion grows s.groups
		child := s.build(s.keys[g.lo][depth:g.end], g.end, g.lo, g.hi)
		binary.LittleEndian.PutUint32(s.tree[offsets+4*i:], child)
	}
	s.groups = s.groups[:base]
	return off
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Version returns the version of the Table the snapshot was compiled from.
func (s *Snapshot) Version() uint64 { return s.version }

// Len returns the number of entries.
func (s *Snapshot) Len() int { return len(s.entries) }

// Table returns the table the snapshot was compiled from (a copy).
func (s *Snapshot) Table() Table {
	return Table{Version: s.version, Entries: append([]Entry(nil), s.entries...)}
}

// find returns the index of the entry owning path, or -1: the longest
// prefix that ends at a component boundary of path. It walks the tree
// with the bytes of path+"/" without building that string.
func (s *Snapshot) find(path string) int32 {
	if s == nil || len(path) == 0 || path[0] != '/' {
		return -1
	}
	t := s.tree
	best := int32(-1)
	end := len(path) + 1 // the length of path+"/"
	off, i := 0, 0
	for {
		h := t[off : off+recordHeader]
		ll := int(binary.LittleEndian.Uint16(h))
		nc := int(binary.LittleEndian.Uint16(h[2:]))
		entry := binary.LittleEndian.Uint32(h[4:])
		off += recordHeader
		label := t[off : off+ll]
		off += ll
		j := i + ll
		switch {
		case j <= len(path):
			if string(label) != path[i:j] {
				return best
			}
		case j == end:
			// The label runs up to the virtual slash after path.
			if label[ll-1] != '/' || string(label[:ll-1]) != path[i:] {
				return best
			}
		default:
			return best
		}
		i = j
		if entry != 0 {
			best = int32(entry - 1)
		}
		if i == end || nc == 0 {
			return best
		}
		c := byte('/')
		if i < len(path) {
			c = path[i]
		}
		var k int
		if first := t[off : off+nc]; nc <= 16 {
			// Few children (the common case): a loop beats a call.
			for k < nc && first[k] < c {
				k++
			}
			if k == nc || first[k] != c {
				return best
			}
		} else if k = bytes.IndexByte(first, c); k < 0 {
			return best
		}
		off = int(binary.LittleEndian.Uint32(t[off+nc+4*k:]))
	}
}

// Lookup returns the entry owning path, a normalized absolute path (the
// entry with the longest Prefix that path equals or continues below), and
// path rewritten into the partition: the entry's Target joined with what
// follows the Prefix in path. ok is false only for a path that is not
// absolute, or on a nil snapshot.
//
// The rewritten path is path itself when Target equals Prefix, and a
// substring of path when Target is "/"; neither allocates. Otherwise it is
// built, which allocates once; LookupAppend avoids that. The returned entry
// belongs to the snapshot and must not be modified.
func (s *Snapshot) Lookup(path string) (e *Entry, inner string, ok bool) {
	i := s.find(path)
	if i < 0 {
		return nil, "", false
	}
	e = &s.entries[i]
	if e.Target == e.Prefix {
		return e, path, true
	}
	rest := restOf(e, path)
	switch {
	case rest == "":
		return e, e.Target, true
	case e.Target == "/":
		return e, rest, true
	}
	return e, e.Target + rest, true
}

// LookupAppend is Lookup that appends the rewritten path to dst and returns
// the extended buffer, allocating only if dst is too small.
func (s *Snapshot) LookupAppend(dst []byte, path string) (e *Entry, out []byte, ok bool) {
	i := s.find(path)
	if i < 0 {
		return nil, dst, false
	}
	e = &s.entries[i]
	rest := restOf(e, path)
	switch {
	case rest == "":
		return e, append(dst, e.Target...), true
	case e.Target != "/":
		dst = append(dst, e.Target...)
	}
	return e, append(dst, rest...), true
}

// restOf returns what follows e.Prefix in path: "" when path is the prefix
// itself, otherwise a string starting with "/".
func restOf(e *Entry, path string) string {
	if e.Prefix == "/" {
		if path == "/" {
			return ""
		}
		return path
	}
	return path[len(e.Prefix):]
}

// Owner returns the entry owning path, as Lookup does, without rewriting
// the path.
func (s *Snapshot) Owner(path string) (e *Entry, ok bool) {
	i := s.find(path)
	if i < 0 {
		return nil, false
	}
	return &s.entries[i], true
}

// SameEntry reports whether the normalized paths a and b are owned by the
// same entry, and returns the prefixes of their owners ("" for a path that
// is not absolute). An operation that links two paths owned by different
// entries (rename, link) must fail with EXDEV, even when both entries name
// the same partition: each mount is its own file system to the client.
func (s *Snapshot) SameEntry(a, b string) (pa, pb string, same bool) {
	ia, ib := s.find(a), s.find(b)
	if ia >= 0 {
		pa = s.entries[ia].Prefix
	}
	if ib >= 0 {
		pb = s.entries[ib].Prefix
	}
	return pa, pb, ia >= 0 && ia == ib
}

// Children returns the names that a listing of the directory dir (a
// normalized absolute path) must show because of mounts below it: the
// component following dir of every mount prefix strictly below dir, each
// once, in byte order. With mounts "/", "/a/b" and "/a/c/d", Children("/a")
// is ["b" "c"] and Children("/") is ["a"]. The result is nil when nothing
// is mounted below dir.
func (s *Snapshot) Children(dir string) []string {
	if s == nil || dir == "" || dir[0] != '/' {
		return nil
	}
	base := "/"
	if dir != "/" {
		base = dir + "/"
	}
	keys := s.keys
	i := sort.SearchStrings(keys, base)
	var names []string
	for i < len(keys) && strings.HasPrefix(keys[i], base) {
		k := keys[i]
		if len(k) == len(base) { // dir itself
			i++
			continue
		}
		n := strings.IndexByte(k[len(base):], '/')
		if n <= 0 { // not a normalized key; cannot happen after Compile
			i++
			continue
		}
		names = append(names, k[len(base):len(base)+n])
		i = skipPrefix(keys, i, k[:len(base)+n+1])
	}
	// Keys sort "b-x/" before "b/", names "b" before "b-x": the names are
	// nearly sorted already.
	slices.Sort(names)
	return names
}

// skipPrefix returns the index of the first key after keys[i] that does
// not start with p, given that keys[i] does: the keys starting with p are
// contiguous. It gallops, so skipping a group of g keys costs O(log g).
func skipPrefix(keys []string, i int, p string) int {
	lo, step := i, 1 // keys[lo] starts with p
	for lo+step < len(keys) && strings.HasPrefix(keys[lo+step], p) {
		lo += step
		step *= 2
	}
	hi := min(lo+step, len(keys)) // keys[hi] does not, or is past the end
	return lo + 1 + sort.Search(hi-lo-1, func(j int) bool { return !strings.HasPrefix(keys[lo+1+j], p) })
}

// Entries calls fn for every entry in order of Prefix until fn returns
// false. The entries belong to the snapshot and must not be modified.
func (s *Snapshot) Entries(fn func(e *Entry) bool) {
	for i := range s.entries {
		if !fn(&s.entries[i]) {
			return
		}
	}
}
