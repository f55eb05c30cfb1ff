package engine

import "syscall"

// Clone makes entry name of directory dstParent a writable copy of the
// node src and, for a directory, of everything below it: a metadata copy
// whose files share the source's data until either side writes
// (clone_copy.go). Both must be in this partition (EXDEV otherwise; a
// caller copies the bytes across partitions). The new entry is checked
// as any new entry (prepareEntry); then, without root, c must be able to
// read every file and to read and search every directory of the source
// (EACCES), and the copy is owned by c, with set-id bits of
// non-directories cleared; root's copy keeps the owners. Attributes,
// times, xattrs and ACLs are copied; hard links within the source stay
// links within the copy. The copy counts against the quotas over
// dstParent like the same nodes created there (EDQUOT, changing
// nothing). A clone of the partition's root leaves out the snapshot area;
// a clone out of a snapshot (PATH/.snapshot/NAME/...) is writable. The
// destination may lie inside the source: the copy is of the source as it
// was before the new entry.
func (e *Engine) Clone(c Cred, src Ino, dstParent Ino, name string, now int64) (Attr, error) {
	if src.Partition() != e.part || dstParent.Partition() != e.part {
		return Attr{}, syscall.EXDEV
	}
	s, err := e.peek(src)
	if err != nil {
		return Attr{}, err
	}
	d, err := e.prepareEntry(c, dstParent, name)
	if err != nil {
		return Attr{}, err
	}
	if s.Nlink == 0 {
		return Attr{}, syscall.ENOENT // an open file whose last link is gone
	}
	if e.pinned(src) {
		return Attr{}, syscall.EBUSY // moving to another partition
	}
	o := copyOpts{c: c, keepOwner: c.IsRoot()}
	if src == e.root {
		o.skip = e.snaps().area
	}
	p, err := e.planCopy(s, name, o)
	if err != nil {
		return Attr{}, err
	}
	q, err := e.checkCopy(p, d, o)
	if err != nil {
		return Attr{}, err
	}
	n := e.makeCopy(p, d, q, o, now)
	return e.attr(n), nil
}
