package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/canopyfs/canopy/internal/trashname"
)

// The trash keeps what is removed for a while instead of freeing it. With
// the trash on (SetTrashDays), a node that a removal would free goes to
// /.trash/<hour>/<parent>-<ino>-<name> of its own partition instead:
// unlink of a non-directory's last link, rmdir of an (empty) directory, and
// a rename replacing a non-directory's last link. <hour> is the hour of
// the removal by the operation's time (the replicated clock), as
// 2006-01-02-15 in UTC; <parent> and <ino> are decimal inode numbers. A
// tree removed by `rm -r` arrives entry by entry, the children before
// their directory, each in the hour directory of its own removal; restoring
// an entry whose directory is itself in the trash restores the directory
// first, so the path comes back from the names. A name too long for the
// trash entry is cut to fit (and restored cut).
//
// The trash is ordinary directories owned by root with mode 0700, so it is
// logged, checkpointed, dumped and checked with the rest of the namespace;
// what lies in it keeps its bytes in use (Statfs) and counts against the
// quota on the root, if any. Removals inside the trash free at once. The
// collector (ExpireTrash) empties each hour directory once its hour ended
// at least the trash's days ago; the server runs it with every logged
// operation, at that operation's time, so every replica empties the same
// hours.
//
// Like all of the engine, the trash belongs to the engine's owner goroutine.

// TrashName is the trash directory's name in the root of each partition.
const TrashName = ".trash"

// trashHourFormat names an hour directory.
const trashHourFormat = "2006-01-02-15"

// TrashEntry is one thing the trash holds: an entry of an hour directory.
type TrashEntry struct {
	Hour   string // the hour directory's name
	Name   string // the entry's name in it: <parent>-<ino>-<name>
	Ino    Ino
	Parent Ino    // the directory it was removed from
	Orig   string // its name there
	Path   string // its original path, if the directory is known; "" if not
	Attr   Attr   // Ctime is the time of the removal
	Files  uint64 // nodes in it, itself included
	Bytes  uint64 // bytes of the regular files in it
}

// trashState is the trash's settings and what the collector knows. It
// belongs to the engine's owner goroutine.
type trashState struct {
	days int // days the trash keeps removed nodes; 0: off
	// next is the earliest time at which ExpireTrash may free something,
	// as of the trash directory in the state sig describes: 0 when not
	// known (it then looks), math.MaxInt64 when the trash holds no hour.
	// It only saves work: what expires is a function of the tree and the
	// time alone, so it is not in checkpoints, and any change to the
	// trash directory's entries (a new hour, root's own mkdir or rename
	// there) makes the collector look again.
	next int64
	sig  trashSig
}

// trashSig is what changes when the trash directory's entries do.
type trashSig struct {
	ino          Ino
	live         int
	mtime, ctime int64
}

// trashSigNow returns the trash directory's trashSig now.
func (e *Engine) trashSigNow() trashSig {
	t := e.trashRoot()
	if t == nil {
		return trashSig{}
	}
	return trashSig{ino: t.Ino, live: e.st.extraOf(t).dir.live, mtime: t.Mtime, ctime: t.Ctime}
}

// ErrNotInTrash is returned for a restore of a name the trash does not hold.
var ErrNotInTrash = errors.New("not in the trash")

// MaxTrashDays is the longest the trash keeps anything: 100 years.
const MaxTrashDays = 36500

// SetTrashDays turns the trash on, keeping removed nodes for days days
// (at most MaxTrashDays), or off with 0. It is state: the server changes
// it only through a logged record, so that replay and every replica
// apply removals alike.
func (e *Engine) SetTrashDays(days int) { e.trash = trashState{days: min(max(days, 0), MaxTrashDays)} }

// TrashDays returns the days the trash keeps what it holds; 0: off.
func (e *Engine) TrashDays() int { return e.trash.days }

// trashRoot returns /.trash, or nil if there is none.
func (e *Engine) trashRoot() *node {
	_, t := e.peekChild(e.peekAt(e.st.slotOf(e.root)), TrashName)
	if t == nil || !t.isDir() {
		return nil
	}
	return t
}

// inTrash reports whether directory d is the trash or lies below it.
func (e *Engine) inTrash(d *node) bool {
	t := e.trashRoot()
	if t == nil {
		return false
	}
	for d.Ino != e.root {
		if d.Ino == t.Ino {
			return true
		}
		d = e.peekAt(e.st.slotOf(e.parentOf(d)))
	}
	return false
}

// trashDirAt returns the hour directory for time now, making it and the
// trash as needed.
func (e *Engine) trashDirAt(now int64) (*node, error) {
	t := e.trashRoot()
	if t == nil {
		a, err := e.Mkdir(Root, e.root, TrashName, 0o700, now)
		if err != nil {
			return nil, err
		}
		t = e.node(a.Ino)
	}
	hour := time.Unix(0, now).UTC().Format(trashHourFormat)
	if _, h := e.child(t, hour); h != nil {
		if !h.isDir() {
			return nil, syscall.ENOTDIR
		}
		return h, nil
	}
	a, err := e.Mkdir(Root, t.Ino, hour, 0o700, now)
	if err != nil {
		return nil, err
	}
	return e.node(a.Ino), nil
}

// trashEntryName is the name of the trash entry for entry name of
// directory parent, which named ino (internal/trashname).
func trashEntryName(parent, ino Ino, name string) string {
	return trashname.Entry(uint64(parent), uint64(ino), name, MaxNameLen)
}

// parseTrashName splits an hour directory's entry name.
func parseTrashName(s string) (parent, ino Ino, name string, ok bool) {
	p, i, name, ok := trashname.Parse(s)
	return Ino(p), Ino(i), name, ok
}

// toTrash moves the entry name of directory d, which names victim, into
// the trash instead of removing it, and reports whether it did. It does
// not when the trash is off, victim is a non-directory with other links,
// d lies in the trash, victim is the trash, or the move cannot be made (the removal then frees
// as without the trash).
func (e *Engine) toTrash(d *node, name string, victim *node, now int64) bool {
	if e.trash.days == 0 || !victim.isDir() && victim.Nlink > 1 || e.inTrash(d) {
		return false
	}
	if t := e.trashRoot(); t != nil && t.Ino == victim.Ino {
		return false // rmdir of the (empty) trash itself
	}
	h, err := e.trashDirAt(now)
	if err != nil {
		return false
	}
	tname := trashEntryName(d.Ino, victim.Ino, name)
	if e.entries(h).find(tname) >= 0 {
		return false
	}
	if err := e.moveEntry(d, name, victim, h, tname, now); err != nil {
		return false
	}
	return true
}

// moveEntry moves the entry name of directory from, naming n, to the free
// name newName of directory to, with the quotas' accounting of a rename.
func (e *Engine) moveEntry(from *node, name string, n *node, to *node, newName string, now int64) error {
	if e.pinned(to.Ino) || e.pinned(from.Ino) {
		return syscall.EBUSY // an empty directory a directory from another partition replaces
	}
	if e.quota.dirs != nil {
		qa, qb, err := e.quotaRename(from, n, to, nil, false)
		if err != nil {
			return err
		}
		defer qa.apply(e)
		defer qb.apply(e)
	}
	slot := e.entriesMut(from).remove(name)
	from.Mtime, from.Ctime = now, now
	e.addEntry(to, newName, slot, now)
	if n.isDir() && from != to {
		from.Nlink--
		to.Nlink++
		e.st.extraMut(n).parent = to.Ino
	}
	n.Ctime = now
	return nil
}

// dirPath returns the path of directory d from the root.
func (e *Engine) dirPath(d *node) string {
	var parts []string
	for d.Ino != e.root {
		p := e.peekAt(e.st.slotOf(e.parentOf(d)))
		name := ""
		self := e.st.slotOf(d.Ino)
		e.entries(p).each(func(b []byte, slot uint32) bool {
			if slot == self {
				name = string(b)
				return false
			}
			return true
		})
		parts = append(parts, name)
		d = p
	}
	slices.Reverse(parts)
	return "/" + strings.Join(parts, "/")
}

// trashed finds the trash entry of node ino, if the trash holds it.
func (e *Engine) trashed(ino Ino) (h *node, name string, ok bool) {
	t := e.trashRoot()
	if t == nil {
		return nil, "", false
	}
	e.entries(t).each(func(hb []byte, hslot uint32) bool {
		hd := e.peekAt(hslot)
		if !hd.isDir() {
			return true
		}
		e.entries(hd).each(func(b []byte, slot uint32) bool {
			if e.peekAt(slot).Ino == ino {
				h, name, ok = hd, string(b), true
				return false
			}
			return true
		})
		return !ok
	})
	return h, name, ok
}

// origPath returns the original path of trash entry name (of the node
// ino removed from directory parent), following directories that are in
// the trash themselves; "" if the directory is gone.
func (e *Engine) origPath(parent Ino, orig string, depth int) string {
	p := e.st.peek(parent)
	if p == nil || !p.isDir() || depth > MaxPathLen/2 {
		return ""
	}
	var dir string
	if e.inTrash(p) {
		_, pname, ok := e.trashed(parent)
		pp, _, porig, ok2 := parseTrashName(pname)
		if !ok || !ok2 {
			return ""
		}
		if dir = e.origPath(pp, porig, depth+1); dir == "" {
			return ""
		}
	} else {
		dir = e.dirPath(p)
	}
	if dir == "/" {
		return "/" + orig
	}
	return dir + "/" + orig
}

// TrashList returns what the trash holds, by hour and name.
func (e *Engine) TrashList() []TrashEntry {
	t := e.trashRoot()
	if t == nil {
		return nil
	}
	var out []TrashEntry
	for _, hour := range e.sortedNames(t) {
		_, h := e.peekChild(t, hour)
		if !h.isDir() {
			continue
		}
		for _, name := range e.sortedNames(h) {
			_, n := e.peekChild(h, name)
			te := TrashEntry{Hour: hour, Name: name, Ino: n.Ino, Attr: e.attr(n)}
			if p, ino, orig, ok := parseTrashName(name); ok && ino == n.Ino {
				te.Parent, te.Orig = p, orig
				te.Path = e.origPath(p, orig, 0)
			}
			te.Files, te.Bytes = e.treeUsage(n)
			out = append(out, te)
		}
	}
	return out
}

// sortedNames returns directory d's entry names in order.
func (e *Engine) sortedNames(d *node) []string {
	var names []string
	e.entries(d).each(func(b []byte, _ uint32) bool {
		names = append(names, string(b))
		return true
	})
	slices.Sort(names)
	return names
}

// treeUsage counts the nodes and file bytes of the subtree at n.
func (e *Engine) treeUsage(n *node) (files, bytes uint64) {
	files, bytes = 1, bytesOf(n)
	if n.isDir() {
		e.entries(n).each(func(_ []byte, slot uint32) bool {
			f, b := e.treeUsage(e.peekAt(slot))
			files += f
			bytes += b
			return true
		})
	}
	return files, bytes
}

// TrashUsage returns the nodes and file bytes the trash holds, its own
// directories not counted. It walks the trash.
func (e *Engine) TrashUsage() (files, bytes uint64) {
	t := e.trashRoot()
	if t == nil {
		return 0, 0
	}
	e.entries(t).each(func(_ []byte, hslot uint32) bool {
		h := e.peekAt(hslot)
		if !h.isDir() {
			f, b := e.treeUsage(h)
			files += f
			bytes += b
			return true
		}
		e.entries(h).each(func(_ []byte, slot uint32) bool {
			f, b := e.treeUsage(e.peekAt(slot))
			files += f
			bytes += b
			return true
		})
		return true
	})
	return files, bytes
}

// TrashRestore puts the entry name of hour directory hour back where it
// was removed from, and returns the paths it restored: the entry's, after
// those of its directories that were in the trash themselves, which are
// restored first. Only root may (EPERM); an unknown entry is
// ErrNotInTrash, a directory that is gone ENOENT, a name taken again
// EEXIST ("restore /a/b: file exists"). An error with no paths changed
// nothing. An hour directory left empty goes.
func (e *Engine) TrashRestore(c Cred, hour, name string, now int64) ([]string, error) {
	if !c.IsRoot() {
		return nil, syscall.EPERM
	}
	return e.restore(hour, name, now, 0)
}

func (e *Engine) restore(hour, name string, now int64, depth int) ([]string, error) {
	t := e.trashRoot()
	if t == nil {
		return nil, fmt.Errorf("restore %s/%s: %w", hour, name, ErrNotInTrash)
	}
	_, h := e.child(t, hour)
	if h == nil || !h.isDir() {
		return nil, fmt.Errorf("restore %s/%s: %w", hour, name, ErrNotInTrash)
	}
	_, n := e.child(h, name)
	if n == nil {
		return nil, fmt.Errorf("restore %s/%s: %w", hour, name, ErrNotInTrash)
	}
	parent, ino, orig, ok := parseTrashName(name)
	if !ok || ino != n.Ino {
		return nil, fmt.Errorf("restore %s/%s: not a name the trash gave: %w", hour, name, syscall.EINVAL)
	}
	p := e.st.get(parent)
	if p == nil || !p.isDir() || p.Ino == t.Ino || p.Ino == h.Ino {
		return nil, fmt.Errorf("restore %s/%s: directory %d is gone: %w", hour, name, parent, syscall.ENOENT)
	}
	path := e.origPath(parent, orig, 0)
	// The directory is the same node in the trash or out of it, so a name
	// taken again is found before anything moves.
	if e.entries(p).find(orig) >= 0 {
		return nil, fmt.Errorf("restore %s: %w", path, syscall.EEXIST)
	}
	var done []string
	if e.inTrash(p) {
		ph, pname, found := e.trashed(parent)
		if !found || depth > MaxPathLen/2 {
			return nil, fmt.Errorf("restore %s: directory %d lies in the trash: %w", path, parent, syscall.ENOENT)
		}
		var err error
		if done, err = e.restore(e.nameIn(t, ph), pname, now, depth+1); err != nil {
			return done, err
		}
		p, h, n = e.node(parent), e.node(h.Ino), e.node(n.Ino)
	}
	if err := e.moveEntry(h, name, n, p, orig, now); err != nil {
		return done, fmt.Errorf("restore %s: %w", path, err)
	}
	if e.st.extraOf(h).dir.live == 0 {
		if err := e.Rmdir(Root, t.Ino, hour, now); err != nil {
			return append(done, path), fmt.Errorf("restore %s: dropping hour %s: %w", path, hour, err)
		}
	}
	return append(done, path), nil
}

// nameIn returns the name of directory d's entry in directory p.
func (e *Engine) nameIn(p, d *node) string {
	name := ""
	self := e.st.slotOf(d.Ino)
	e.entries(p).each(func(b []byte, slot uint32) bool {
		if slot == self {
			name = string(b)
			return false
		}
		return true
	})
	return name
}

// TrashRestoreHour restores every entry of hour directory hour, and
// returns the paths restored; entries that cannot be restored stay, and
// their errors are joined. An error with no paths changed nothing.
func (e *Engine) TrashRestoreHour(c Cred, hour string, now int64) ([]string, error) {
	if !c.IsRoot() {
		return nil, syscall.EPERM
	}
	t := e.trashRoot()
	var h *node
	if t != nil {
		_, h = e.child(t, hour)
	}
	if h == nil || !h.isDir() {
		return nil, fmt.Errorf("restore %s: %w", hour, ErrNotInTrash)
	}
	var paths []string
	var errs []error
	for _, name := range e.sortedNames(h) {
		if e.trashRoot() == nil {
			break
		}
		if _, hh := e.child(e.trashRoot(), hour); hh == nil || e.entries(hh).find(name) < 0 {
			continue // restored already, as the directory of another
		}
		done, err := e.restore(hour, name, now, 0)
		paths = append(paths, done...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return paths, errors.Join(errs...)
}

// TrashPurge frees every hour directory of the trash whose hour ended at
// or before before (all of them with before math.MaxInt64), and returns
// the nodes and file bytes freed. Only root may (EPERM).
func (e *Engine) TrashPurge(c Cred, before int64, now int64) (files, bytes uint64, err error) {
	if !c.IsRoot() {
		return 0, 0, syscall.EPERM
	}
	t := e.trashRoot()
	if t == nil {
		return 0, 0, nil
	}
	for _, hour := range e.sortedNames(t) {
		start, perr := time.Parse(trashHourFormat, hour)
		if before != math.MaxInt64 && (perr != nil || start.Add(time.Hour).UnixNano() > before) {
			continue
		}
		_, h := e.child(t, hour)
		f, b := e.treeUsage(h)
		if h.isDir() {
			f-- // the hour directory itself
		}
		if err := e.removeTree(t, hour, now); err != nil {
			return files, bytes, fmt.Errorf("purge %s: %w", hour, err)
		}
		files += f
		bytes += b
	}
	return files, bytes, nil
}

// ExpireTrash is the collector: it frees the hour directories whose hour
// ended at least the trash's days before now. With the trash off it frees
// nothing (what the trash holds stays until purged). While nothing is due
// it costs a lookup of the trash directory and a few comparisons.
func (e *Engine) ExpireTrash(now int64) (files, bytes uint64, err error) {
	if e.trash.days == 0 || e.trash.next != 0 && now < e.trash.next && e.trashSigNow() == e.trash.sig {
		return 0, 0, nil
	}
	files, bytes, err = e.TrashPurge(Root, now-e.keep(), now)
	e.trash.next, e.trash.sig = math.MaxInt64, e.trashSigNow()
	if t := e.trashRoot(); t != nil {
		e.entries(t).each(func(b []byte, _ uint32) bool {
			e.trash.next = min(e.trash.next, e.expiryOf(string(b)))
			return true
		})
	}
	return files, bytes, err
}

// keep is how long the trash keeps what it holds, in nanoseconds.
func (e *Engine) keep() int64 { return int64(e.trash.days) * int64(24*time.Hour) }

// expiryOf returns the time at which the collector frees hour directory
// hour; a name that is not an hour's is never freed by the collector.
func (e *Engine) expiryOf(hour string) int64 {
	start, err := time.Parse(trashHourFormat, hour)
	if err != nil {
		return math.MaxInt64
	}
	return start.Add(time.Hour).UnixNano() + e.keep()
}

// removeTree removes entry name of directory d and everything below it,
// as root; d lies in the trash, so nothing goes to the trash again.
func (e *Engine) removeTree(d *node, name string, now int64) error {
	_, n := e.child(d, name)
	if n == nil {
		return syscall.ENOENT
	}
	if !n.isDir() {
		return e.Unlink(Root, d.Ino, name, now)
	}
	for _, child := range e.sortedNames(n) {
		if err := e.removeTree(n, child, now); err != nil {
			return err
		}
	}
	return e.Rmdir(Root, d.Ino, name, now)
}

// checkTrash checks that every hour directory's entries carry the names
// the trash gives, with the inode number of the node they name.
func (e *Engine) checkTrash() error {
	t := e.trashRoot()
	if t == nil {
		return nil
	}
	for _, hour := range e.sortedNames(t) {
		_, h := e.peekChild(t, hour)
		if !h.isDir() {
			return fmt.Errorf("trash: %s is not a directory", hour)
		}
		if _, err := time.Parse(trashHourFormat, hour); err != nil {
			return fmt.Errorf("trash: bad hour %q", hour)
		}
		for _, name := range e.sortedNames(h) {
			_, n := e.peekChild(h, name)
			if _, ino, _, ok := parseTrashName(name); !ok || ino != n.Ino {
				return fmt.Errorf("trash: %s/%s names node %d", hour, name, n.Ino)
			}
		}
	}
	return nil
}
