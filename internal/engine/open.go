package engine

import (
	"slices"
	"syscall"
)

// Open flags, as Linux open(2).
const (
	OpenReadOnly  = syscall.O_RDONLY
	OpenWriteOnly = syscall.O_WRONLY
	OpenReadWrite = syscall.O_RDWR
	OpenTrunc     = syscall.O_TRUNC
	// OpenCreated marks the open that completes a create (open(2) with
	// O_CREAT making the file): as on Linux it is granted to the new
	// file's owner whatever the mode the file was given, 0 included.
	OpenCreated = syscall.O_CREAT
	openAccMode = syscall.O_ACCMODE
)

// Open checks that c may open ino with flags as Linux open(2) does (read
// permission for reading, write permission for writing or O_TRUNC, EISDIR
// for writing a directory; none for OpenCreated by the owner) and counts
// one more open of it. While a file
// is open, removing its last link keeps it, unreachable by path but still
// served by inode, until the last Close. Truncation is a separate SetAttr.
//
// Open counts are not in the engine's checkpoint: the server logs OPEN
// and CLOSE and checkpoints who has what open, and gives the counts back
// with RestoreOpens. The caller pairs every successful Open with one Close.
func (e *Engine) Open(c Cred, ino Ino, flags uint32) (Attr, error) {
	n, err := e.peek(ino) // Open changes no node, only the open counts
	if err != nil {
		return Attr{}, err
	}
	if n.Nlink == 0 {
		return Attr{}, syscall.ENOENT // an orphan is kept for those who have it open
	}
	if e.pinned(ino) {
		return Attr{}, syscall.EBUSY // moving to another partition
	}
	var want uint32
	switch flags & openAccMode {
	case OpenReadOnly:
		want = mayRead
	case OpenWriteOnly:
		want = mayWrite
	case OpenReadWrite:
		want = mayRead | mayWrite
	default:
		return Attr{}, syscall.EINVAL
	}
	if flags&OpenTrunc != 0 {
		want |= mayWrite
	}
	if n.isDir() && want&mayWrite != 0 {
		return Attr{}, syscall.EISDIR
	}
	if want&mayWrite != 0 {
		if err := e.roCheck(ino); err != nil {
			return Attr{}, err
		}
	}
	if flags&OpenCreated == 0 || !e.isOwner(c, n) {
		if err := e.access(c, n, want); err != nil {
			return Attr{}, err
		}
	}
	e.opens[ino]++
	return e.attr(n), nil
}

// Close ends one Open of ino (EBADF if it is not open). Closing the last
// open of a file whose last link is gone frees it, and its slices become
// garbage at now.
func (e *Engine) Close(ino Ino, now int64) error {
	k := e.opens[ino]
	if k == 0 {
		return syscall.EBADF
	}
	if k > 1 {
		e.opens[ino] = k - 1
		return nil
	}
	delete(e.opens, ino)
	if _, orphan := e.orphans[ino]; orphan && !e.holdOrphans {
		e.freeNode(e.node(ino), now)
	}
	return nil
}

// Opens returns the number of opens of ino not yet closed.
func (e *Engine) Opens(ino Ino) int { return int(e.opens[ino]) }

// OpenFiles returns the number of nodes open at least once.
func (e *Engine) OpenFiles() int { return len(e.opens) }

// Orphans returns the number of files kept with no links because they are
// open (or, while orphans are held, were unlinked).
func (e *Engine) Orphans() int { return len(e.orphans) }

// HoldOrphans(true) makes files whose last link goes stay as orphans
// whether or not they are open, until HoldOrphans(false) or
// ReleaseOrphans; those already kept stay either way. Only the replay of
// logs written before OPEN and CLOSE were logged uses it: their records
// that kept an open file hold it (a later record may still name it).
func (e *Engine) HoldOrphans(hold bool) { e.holdOrphans = hold }

// ReleaseOrphans ends HoldOrphans and frees every orphan that is not open,
// in inode order (node slots are reused in the order they are freed, so
// the order is part of the state); their slices become garbage at now.
func (e *Engine) ReleaseOrphans(now int64) {
	e.holdOrphans = false
	var free []Ino
	for ino := range e.orphans {
		if e.opens[ino] == 0 {
			free = append(free, ino)
		}
	}
	slices.Sort(free)
	for _, ino := range free {
		e.freeNode(e.node(ino), now)
	}
}

// RestoreOpens adds k opens of ino without the checks of Open: it gives
// back open counts kept outside the engine's checkpoint (an orphan, which
// Open refuses, included). ENOENT if there is no such node.
func (e *Engine) RestoreOpens(ino Ino, k uint32) error {
	if _, err := e.get(ino); err != nil {
		return err
	}
	e.opens[ino] += k
	return nil
}

// freeNode removes the node n, which has no links left, and releases its
// data at now.
func (e *Engine) freeNode(n *node, now int64) {
	if n.Mode&S_IFMT == S_IFREG {
		e.used -= n.Size
		e.freeData(n, now)
	}
	delete(e.orphans, n.Ino)
	delete(e.opens, n.Ino)
	e.st.remove(n.Ino)
}
