package mount

import (
	"fmt"
	"sort"
	"syscall"
)

// VirtualPartitions is the size of the fixed space of virtual partitions
// that mount entries point at. The routing table maps each one to a
// metadata group.
const VirtualPartitions = 4096

// Entry is one mount: the subtree of the global namespace at Prefix lives
// in virtual partition VPart, at the path Target inside it. Prefix and
// Target are normalized absolute paths; Target "/" mounts the partition's
// root. ReadOnly marks the subtree as refusing changes; it covers the paths
// this entry owns, not a deeper entry, which has its own flag.
type Entry struct {
	Prefix   string
	VPart    uint16
	Target   string
	ReadOnly bool
}

// Table is the durable form of the mount table, kept in the root
// partition: a version and the entries in increasing order of Prefix (byte
// order), one per prefix. The root "/" must be mounted, so every path has
// an owner.
type Table struct {
	Version uint64
	Entries []Entry
}

// Validate reports the first problem that keeps t from being compiled: an
// entry whose Prefix or Target is not normalized, a VPart outside
// [0, VirtualPartitions), entries out of order or repeated, or no entry for
// "/". The error wraps syscall.EINVAL.
func (t *Table) Validate() error {
	root := false
	for i := range t.Entries {
		e := &t.Entries[i]
		if err := e.validate(); err != nil {
			return err
		}
		if i > 0 {
			switch prev := t.Entries[i-1].Prefix; {
			case prev == e.Prefix:
				return tableError("prefix %q mounted twice", e.Prefix)
			case prev > e.Prefix:
				return tableError("entries out of order: %q after %q", e.Prefix, prev)
			}
		}
		if e.Prefix == "/" {
			root = true
		}
	}
	if !root {
		return tableError("the root \"/\" is not mounted")
	}
	return nil
}

func (e *Entry) validate() error {
	if !isNormal(e.Prefix) {
		return tableError("prefix %s is not a normalized absolute path", quoteShort(e.Prefix))
	}
	if !isNormal(e.Target) {
		return tableError("target %s of %q is not a normalized absolute path", quoteShort(e.Target), e.Prefix)
	}
	if e.VPart >= VirtualPartitions {
		return tableError("vpart %d of %q is out of range [0, %d)", e.VPart, e.Prefix, VirtualPartitions)
	}
	return nil
}

func tableError(format string, args ...any) error {
	return fmt.Errorf("mount: table: "+format+": %w", append(args, syscall.EINVAL)...)
}

// Set returns a copy of t, one version later, with e added, or replacing
// the entry with the same prefix. Prefix and Target are normalized first;
// an entry that is still invalid is refused (EINVAL, or ENAMETOOLONG for a
// path over the limits). t itself is not changed.
func (t Table) Set(e Entry) (Table, error) {
	var err error
	if e.Prefix, err = Normalize(e.Prefix); err != nil {
		return Table{}, err
	}
	if e.Target, err = Normalize(e.Target); err != nil {
		return Table{}, err
	}
	if err := e.validate(); err != nil {
		return Table{}, err
	}
	i := sort.Search(len(t.Entries), func(i int) bool { return t.Entries[i].Prefix >= e.Prefix })
	out := Table{Version: t.Version + 1, Entries: make([]Entry, 0, len(t.Entries)+1)}
	out.Entries = append(out.Entries, t.Entries[:i]...)
	out.Entries = append(out.Entries, e)
	if i < len(t.Entries) && t.Entries[i].Prefix == e.Prefix {
		i++
	}
	out.Entries = append(out.Entries, t.Entries[i:]...)
	return out, nil
}

// Remove returns a copy of t, one version later, without the entry for
// prefix (normalized first). It fails with ENOENT if there is no such
// entry and with EINVAL for the root, which must stay mounted. t itself is
// not changed.
func (t Table) Remove(prefix string) (Table, error) {
	p, err := Normalize(prefix)
	if err != nil {
		return Table{}, err
	}
	if p == "/" {
		return Table{}, tableError("the root \"/\" cannot be unmounted")
	}
	i := sort.Search(len(t.Entries), func(i int) bool { return t.Entries[i].Prefix >= p })
	if i == len(t.Entries) || t.Entries[i].Prefix != p {
		return Table{}, fmt.Errorf("mount: table: %q is not mounted: %w", p, syscall.ENOENT)
	}
	out := Table{Version: t.Version + 1, Entries: make([]Entry, 0, len(t.Entries)-1)}
	out.Entries = append(out.Entries, t.Entries[:i]...)
	out.Entries = append(out.Entries, t.Entries[i+1:]...)
	return out, nil
}
