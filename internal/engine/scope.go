package engine

import (
	"errors"
	"syscall"
)

// DirUnder reports whether the directory ino is top or lies below it,
// walking the parent links directories keep (a path-scoped credential sees
// only top's subtree; see internal/server/scope.go). A node that is not a
// directory has no parent link: ENOTDIR. A missing node: ENOENT.
func (e *Engine) DirUnder(ino, top Ino) (bool, error) {
	n, err := e.peek(ino) // reads only: no copy of a frozen chunk
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
		if n, err = e.peek(ino); err != nil {
			return false, err
		}
	}
	return false, nil
}

// LinkedUnder reports whether the node ino (of any type) has a link in a
// directory that is top or lies below it: the directories of that
// subtree are searched, depth first, reading their entries without
// changing anything (an idle directory stays packed). It gives up,
// reporting false and ErrSearchBudget, after budget entries (no limit if
// not positive). A missing node: ENOENT. It is how a path-scoped
// credential's inode calls on files are confined when the node was not
// shown to the client by this server (internal/server/scope.go).
func (e *Engine) LinkedUnder(ino, top Ino, budget int) (bool, error) {
	target := e.st.slotOf(ino)
	if target == 0 {
		return false, syscall.ENOENT
	}
	if ino == top {
		return true, nil
	}
	start := e.st.slotOf(top)
	if start == 0 || !e.peekAt(start).isDir() {
		return false, nil
	}
	seen := 0
	found, over := false, false
	for stack := []uint32{start}; len(stack) > 0 && !found && !over; {
		d := e.peekAt(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		e.st.extraOf(d).dir.each(func(_ []byte, slot uint32) bool {
			if slot == target {
				found = true
				return false
			}
			if seen++; budget > 0 && seen > budget {
				over = true
				return false
			}
			if e.peekAt(slot).isDir() {
				stack = append(stack, slot)
			}
			return true
		})
	}
	if over && !found {
		return false, ErrSearchBudget
	}
	return found, nil
}

// ErrSearchBudget is LinkedUnder giving up on a subtree larger than its
// budget.
var ErrSearchBudget = errors.New("subtree larger than the search budget")
