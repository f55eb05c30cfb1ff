package locks

// fileLocks are the locks and waits on one inode.
type fileLocks struct {
	posix   []Lock
	flocks  []Lock
	waiters []*lockWaiter // SETLKW calls in arrival order
}

func (f *fileLocks) empty() bool {
	return len(f.posix) == 0 && len(f.flocks) == 0 && len(f.waiters) == 0
}

// conflict returns the first lock that keeps r from being taken: another
// owner's lock overlapping it where either is a write lock.
func (f *fileLocks) conflict(r *Request) (Lock, bool) {
	locks := f.posix
	if r.Flock {
		locks = f.flocks
	}
	for _, l := range locks {
		if l.Owner != r.Owner && (l.Type == Write || r.Type == Write) && l.overlaps(r.Start, r.End) {
			return l, true
		}
	}
	return Lock{}, false
}

// apply takes, changes or releases r's lock, which must not conflict.
// For POSIX locks the owner's ranges are split where r cuts them and
// merged with r where they touch it with the same type; a flock replaces
// the owner's flock.
func (f *fileLocks) apply(r *Request) {
	if r.Flock {
		out := f.flocks[:0]
		for _, l := range f.flocks {
			if l.Owner != r.Owner {
				out = append(out, l)
			}
		}
		f.flocks = out
		if r.Type != Unlock {
			f.flocks = append(f.flocks, Lock{Owner: r.Owner, Type: r.Type, Start: 0, End: EOF, Pid: r.Pid})
		}
		return
	}
	var out []Lock
	for _, l := range f.posix {
		if l.Owner != r.Owner || !l.overlaps(r.Start, r.End) {
			out = append(out, l)
			continue
		}
		if l.Start < r.Start {
			left := l
			left.End = r.Start - 1
			out = append(out, left)
		}
		if l.End > r.End {
			right := l
			right.Start = r.End + 1
			out = append(out, right)
		}
	}
	if r.Type != Unlock {
		n := Lock{Owner: r.Owner, Type: r.Type, Start: r.Start, End: r.End, Pid: r.Pid}
		for i := 0; i < len(out); {
			l := out[i]
			// Ends are at most EOF, so end+1 cannot overflow.
			if l.Owner == r.Owner && l.Type == n.Type && (l.End+1 == n.Start || n.End+1 == l.Start) {
				n.Start, n.End = min(n.Start, l.Start), max(n.End, l.End)
				out = append(out[:i], out[i+1:]...)
				continue
			}
			i++
		}
		out = append(out, n)
	}
	f.posix = out
}

// count is the number of lock entries and waits client has here.
func (f *fileLocks) count(client ClientID) int {
	n := 0
	for _, l := range f.posix {
		if l.Owner.Client == client {
			n++
		}
	}
	for _, l := range f.flocks {
		if l.Owner.Client == client {
			n++
		}
	}
	for _, w := range f.waiters {
		if w.req.Owner.Client == client {
			n++
		}
	}
	return n
}

// dropClient removes every lock and wait of client; it returns the waits
// removed.
func (f *fileLocks) dropClient(client ClientID) []*lockWaiter {
	keep := func(ls []Lock) []Lock {
		out := ls[:0]
		for _, l := range ls {
			if l.Owner.Client != client {
				out = append(out, l)
			}
		}
		return out
	}
	f.posix, f.flocks = keep(f.posix), keep(f.flocks)
	var gone []*lockWaiter
	ws := f.waiters[:0]
	for _, w := range f.waiters {
		if w.req.Owner.Client == client {
			gone = append(gone, w)
		} else {
			ws = append(ws, w)
		}
	}
	f.waiters = ws
	return gone
}
