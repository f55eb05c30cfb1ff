package engine

import "syscall"

// Open flags, as Linux open(2).
const (
	OpenReadOnly  = syscall.O_RDONLY
	OpenWriteOnly = syscall.O_WRONLY
	OpenReadWrite = syscall.O_RDWR
	OpenTrunc     = syscall.O_TRUNC
	openAccMode   = syscall.O_ACCMODE
)

// Open checks that c may open ino with flags as Linux open(2) does (read
// permission for reading, write permission for writing or O_TRUNC, EISDIR
// for writing a directory) and counts one more open of it. While a file
// is open, removing its last link keeps it, unreachable by path but still
// served by inode, until the last Close. Truncation is a separate SetAttr.
//
// Open counts are not part of the logged state: after a restart nobody
// has a file open. The caller pairs every successful Open with one Close.
func (e *Engine) Open(c Cred, ino Ino, flags uint32) (Attr, error) {
	n, err := e.get(ino)
	if err != nil {
		return Attr{}, err
	}
	if n.Nlink == 0 {
		return Attr{}, syscall.ENOENT // an orphan is kept for those who have it open
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
	if err := e.access(c, n, want); err != nil {
		return Attr{}, err
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
// ReleaseOrphans; those already kept stay either way. Recovery holds them
// for the logged calls that kept an open file (a later logged call may
// still name it, and open counts are not logged).
func (e *Engine) HoldOrphans(hold bool) { e.holdOrphans = hold }

// ReleaseOrphans ends HoldOrphans and frees every orphan that is not open;
// their slices become garbage at now. After a restart that is every
// orphan, including those a checkpoint kept.
func (e *Engine) ReleaseOrphans(now int64) {
	e.holdOrphans = false
	for ino := range e.orphans {
		if e.opens[ino] == 0 {
			e.freeNode(e.node(ino), now)
		}
	}
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
