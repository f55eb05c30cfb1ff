package locks

import (
	"cmp"
	"slices"
)

// Held returns the lock entries and waits each client session holds, for
// a status page; any goroutine may call it.
func (t *Table) Held() map[ClientID]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[ClientID]int, len(t.sessions))
	for id, s := range t.sessions {
		if s.total > 0 {
			out[id] = s.total
		}
	}
	return out
}

// Locks returns the locks client holds, as requests that would take them
// again, ordered by inode, kind, owner and range; any goroutine may call
// it.
func (t *Table) Locks(client ClientID) []Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sessions[client]
	if s == nil {
		return nil
	}
	var out []Request
	for ino := range s.held {
		f := t.files[ino]
		if f == nil {
			continue
		}
		for _, kind := range []struct {
			locks []Lock
			flock bool
		}{{f.posix, false}, {f.flocks, true}} {
			for _, l := range kind.locks {
				if l.Owner.Client == client {
					out = append(out, Request{Ino: ino, Owner: l.Owner, Type: l.Type, Start: l.Start, End: l.End,
						Pid: l.Pid, Flock: kind.flock})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Request) int {
		if c := cmp.Compare(a.Ino, b.Ino); c != 0 {
			return c
		}
		if a.Flock != b.Flock {
			if a.Flock {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Owner.ID, b.Owner.ID), cmp.Compare(a.Start, b.Start))
	})
	return out
}
