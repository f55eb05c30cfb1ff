package engine

import "syscall"

// DirUnder reports whether the directory ino is top or lies below it,
// walking the parent links directories keep (a path-scoped credential sees
// only top's subtree; see internal/server/scope.go). A node that is not a
// directory has no parent link: ENOTDIR. A missing node: ENOENT.
func (e *Engine) DirUnder(ino, top Ino) (bool, error) {
	n, err := e.get(ino)
	if err != nil {
		return false, err
	}
	if !n.isDir() {
		return false, syscall.ENOTDIR
	}
	for range MaxPathLen { // deeper than any path can reach: a broken chain
		if ino == top {
			return true, nil
		}
		parent := e.parentOf(n)
		if parent == ino { // the root
			return false, nil
		}
		ino = parent
		if n, err = e.get(ino); err != nil {
			return false, err
		}
	}
	return false, nil
}
