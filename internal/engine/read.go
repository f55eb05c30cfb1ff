package engine

import "syscall"

// DefaultReaddirLimit is the page size of Readdir when the caller gives none.
const DefaultReaddirLimit = 1024

// Lookup returns the attributes of the entry name in directory parent.
// c needs search permission on parent. A parent that does not exist is
// ESTALE.
func (e *Engine) Lookup(c Cred, parent Ino, name string) (Attr, error) {
	d, err := e.peekDir(parent)
	if err == syscall.ENOENT {
		// The directory itself is gone (removed, or moved to another
		// partition, which numbered it anew): a stale handle, as NFS and
		// open_by_handle_at(2) say, on which a mount walks the path again.
		return Attr{}, syscall.ESTALE
	}
	if err != nil {
		return Attr{}, err
	}
	if err := checkSyntax(name); err != nil {
		return Attr{}, err
	}
	n, err := e.lookupIn(c, d, name)
	if err != nil {
		return Attr{}, err
	}
	return e.attr(n), nil
}

// GetAttr returns the attributes of ino. Like NFS's GETATTR it checks no
// permission: a caller that holds the inode number already found it.
func (e *Engine) GetAttr(ino Ino) (Attr, error) {
	n, err := e.peek(ino)
	if err != nil {
		return Attr{}, err
	}
	return e.attr(n), nil
}

// Readlink returns the target of the symlink ino (EINVAL if it is not one).
func (e *Engine) Readlink(ino Ino) (string, error) {
	n, err := e.peek(ino)
	if err != nil {
		return "", err
	}
	if n.Mode&S_IFMT != S_IFLNK {
		return "", syscall.EINVAL
	}
	return e.st.extraOf(n).target, nil
}

// Readdir returns up to limit entries of directory ino whose names sort
// after cursor, in byte order, and the cursor for the next page; eof is set
// when no entries follow. "." and ".." are not listed. c needs read
// permission on the directory.
func (e *Engine) Readdir(c Cred, ino Ino, cursor string, limit int, withAttrs bool) (ents []Dirent, next string, eof bool, err error) {
	d, err := e.peekDir(ino)
	if err != nil {
		return nil, "", false, err
	}
	if err := e.access(c, d, mayRead); err != nil {
		return nil, "", false, err
	}
	if limit <= 0 {
		limit = DefaultReaddirLimit
	}
	des := e.entries(d)
	ents = make([]Dirent, 0, min(limit, des.live))
	eof = des.list(cursor, func(off int) bool {
		if len(ents) == limit {
			return false
		}
		child := e.peekAt(des.slotAt(off))
		ent := Dirent{Name: des.nameString(off), Ino: child.Ino, Type: child.Mode & S_IFMT}
		if withAttrs {
			ent.Attr = e.attr(child)
		}
		ents = append(ents, ent)
		return true
	})
	if len(ents) > 0 {
		next = ents[len(ents)-1].Name
	} else {
		next = cursor
	}
	return ents, next, eof, nil
}

// Statfs returns the partition's capacity and use.
func (e *Engine) Statfs() Statfs {
	return Statfs{
		TotalBytes:  nominalBytes,
		UsedBytes:   e.used,
		TotalInodes: nominalInodes,
		UsedInodes:  uint64(e.st.len()),
		BlockSize:   blockSize,
		MaxName:     MaxNameLen,
	}
}

// Summary counts the directories, other nodes and file bytes in the subtree
// at ino; a node with several links in the subtree counts once per link, as
// in `du --count-links`. c needs read and search permission on every
// directory in the subtree, as a recursive listing would.
func (e *Engine) Summary(c Cred, ino Ino) (Summary, error) {
	n, err := e.peek(ino)
	if err != nil {
		return Summary{}, err
	}
	var s Summary
	stack := []*node{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !n.isDir() {
			s.Files++
			if n.Mode&S_IFMT == S_IFREG {
				s.Bytes += n.Size
			}
			continue
		}
		s.Dirs++
		if err := e.access(c, n, mayRead|mayExec); err != nil {
			return Summary{}, err
		}
		e.st.extraOf(n).dir.each(func(_ []byte, slot uint32) bool {
			stack = append(stack, e.peekAt(slot))
			return true
		})
	}
	return s, nil
}
