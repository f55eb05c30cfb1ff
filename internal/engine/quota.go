package engine

import (
	"fmt"
	"slices"
	"syscall"
)

// Directory quotas limit the nodes and the bytes below a directory: every
// node of the subtree counts once (the directory itself does not), and
// every regular file its size. Quotas nest, and every quota over a place
// holds: an operation that would take any of them past its limit fails
// with EDQUOT and changes nothing.
//
// Usage is kept incrementally. Each directory with a quota keeps its
// figures (quotaUse); an operation finds the quotas over a place by
// walking up the directories' parents to the nearest directories with a
// quota, and costs one map test per ancestor while quotas exist and one
// compare when none does. A non-directory has no parent of its own, so
// every non-directory below some quota keeps a tag: the nearest directory
// with a quota above it, its region. The region is part of the node's
// interned owner triple (owners.go), so it costs no memory per file: the
// 4-byte owner id every node has names it. For the region to be one, all
// the links of a node lie below the same nearest quota: a link or a
// rename that would put links of one node under different quotas fails
// with EXDEV, as it would between two file systems.
//
// What is logged is setting and removing a quota; the usage and the tags
// are a function of the tree and the quotas, so a checkpoint holds only the
// limits (quota_checkpoint.go) and Load counts the rest again.

// QuotaLimit is a directory quota as set: the directory and its limits.
type QuotaLimit struct {
	Dir      Ino
	MaxFiles uint64 // nodes below Dir; 0: no limit
	MaxBytes uint64 // bytes of the regular files below Dir; 0: no limit
}

// Quota is a directory quota and what lies below its directory now.
type Quota struct {
	QuotaLimit
	Files uint64 // nodes below Dir, each counted once however many links it has
	Bytes uint64 // sizes of the regular files below Dir
}

// QuotaMismatch is a quota whose kept usage differs from a full count.
type QuotaMismatch struct {
	Dir          Ino
	Files, Bytes uint64 // kept
	CountFiles   uint64 // counted
	CountBytes   uint64
}

// quotaUse is one quota's limits and the usage kept for it.
type quotaUse struct {
	QuotaLimit
	files, bytes uint64
}

// quotaState is the engine's quotas. It belongs to the engine's owner
// goroutine; a freeze shares list only, which is replaced on every change
// and never changed in place.
type quotaState struct {
	dirs map[Ino]*quotaUse // by directory; nil when there is no quota
	list []QuotaLimit      // the limits, by directory, for checkpoints

	stale bool // loaded, and the usage and tags not counted yet (checkQuotas counts them)
}

// SetQuota sets the limits of the quota on directory ino, making one if
// there is none. Only root may (EPERM). Limits below what the subtree
// holds now are refused (EDQUOT), and so is a subtree holding a node with
// links outside it that would then lie under another quota (EXDEV). A
// directory in the snapshot area takes none (EROFS): the area is read
// only, and snapshots count under the quotas over the root.
func (e *Engine) SetQuota(c Cred, ino Ino, maxFiles, maxBytes uint64) (Quota, error) {
	if !c.IsRoot() {
		return Quota{}, syscall.EPERM
	}
	d, err := e.peekDir(ino)
	if err != nil {
		return Quota{}, err
	}
	if err := e.roCheck(ino); err != nil {
		return Quota{}, err // the snapshot area is read only, and its copies count under the root's quotas
	}
	lim := QuotaLimit{Dir: ino, MaxFiles: maxFiles, MaxBytes: maxBytes}
	if u, ok := e.quota.dirs[ino]; ok {
		if err := checkBelow(lim, u.files, u.bytes); err != nil {
			return Quota{}, err
		}
		u.QuotaLimit = lim
		e.replaceQuotaList()
		return u.quota(), nil
	}
	files, bytes, region, err := e.regionUsage(d)
	if err != nil {
		return Quota{}, err
	}
	if err := checkBelow(lim, files, bytes); err != nil {
		return Quota{}, err
	}
	if e.quota.dirs == nil {
		e.quota.dirs = make(map[Ino]*quotaUse)
	}
	u := &quotaUse{QuotaLimit: lim, files: files, bytes: bytes}
	e.quota.dirs[ino] = u
	for _, slot := range region {
		e.setRegion(e.at(slot), ino)
	}
	e.replaceQuotaList()
	return u.quota(), nil
}

// checkBelow refuses limits that what is in use already exceeds.
func checkBelow(lim QuotaLimit, files, bytes uint64) error {
	if lim.MaxFiles > 0 && files > lim.MaxFiles || lim.MaxBytes > 0 && bytes > lim.MaxBytes {
		return fmt.Errorf("quota below usage: %d files and %d bytes in use: %w", files, bytes, syscall.EDQUOT)
	}
	return nil
}

// RemoveQuota removes the quota on directory ino: ENODATA if there is
// none. Only root may (EPERM).
func (e *Engine) RemoveQuota(c Cred, ino Ino) error {
	if !c.IsRoot() {
		return syscall.EPERM
	}
	d, err := e.peekDir(ino)
	if err != nil {
		return err
	}
	if _, ok := e.quota.dirs[ino]; !ok {
		return syscall.ENODATA
	}
	_, _, region, err := e.regionUsage(d)
	if err != nil {
		return err // cannot happen: the region's links are all inside it
	}
	up := Ino(0)
	if ino != e.root {
		up = e.nearestQuota(e.parentOf(d))
	}
	for _, slot := range region {
		e.setRegion(e.at(slot), up)
	}
	e.dropQuota(ino)
	return nil
}

// dropQuota forgets the quota on dir.
func (e *Engine) dropQuota(dir Ino) {
	delete(e.quota.dirs, dir)
	if len(e.quota.dirs) == 0 {
		e.quota = quotaState{}
		return
	}
	e.replaceQuotaList()
}

// replaceQuotaList makes a new list of the limits (a freeze may hold the
// old one).
func (e *Engine) replaceQuotaList() {
	list := make([]QuotaLimit, 0, len(e.quota.dirs))
	for _, u := range e.quota.dirs {
		list = append(list, u.QuotaLimit)
	}
	slices.SortFunc(list, func(a, b QuotaLimit) int { return cmpIno(a.Dir, b.Dir) })
	e.quota.list = list
}

func cmpIno(a, b Ino) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (u *quotaUse) quota() Quota {
	return Quota{QuotaLimit: u.QuotaLimit, Files: u.files, Bytes: u.bytes}
}

// GetQuota returns the quota on directory ino: ENODATA if there is none.
func (e *Engine) GetQuota(ino Ino) (Quota, error) {
	if _, err := e.peekDir(ino); err != nil {
		return Quota{}, err
	}
	u, ok := e.quota.dirs[ino]
	if !ok {
		return Quota{}, syscall.ENODATA
	}
	return u.quota(), nil
}

// Quotas returns every quota, by directory.
func (e *Engine) Quotas() []Quota {
	out := make([]Quota, 0, len(e.quota.list))
	for _, l := range e.quota.list {
		out = append(out, e.quota.dirs[l.Dir].quota())
	}
	return out
}

// QuotaOver returns the nearest quota over node ino (ino's own, for a
// directory that has one), and whether there is one.
func (e *Engine) QuotaOver(ino Ino) (Quota, bool) {
	if e.quota.dirs == nil {
		return Quota{}, false
	}
	n := e.st.peek(ino)
	if n == nil {
		return Quota{}, false
	}
	q := e.regionOfNode(n)
	if n.isDir() {
		q = e.nearestQuota(ino)
	}
	if q == 0 {
		return Quota{}, false
	}
	return e.quota.dirs[q].quota(), true
}

// StatfsAt is Statfs as seen from node ino: below a quota, the nearest
// quota's limits are the capacity (where it has one) and its usage the
// use, as df shows inside a directory with a quota.
func (e *Engine) StatfsAt(ino Ino) Statfs {
	s := e.Statfs()
	q, ok := e.QuotaOver(ino)
	if !ok {
		return s
	}
	s.UsedBytes, s.UsedInodes = q.Bytes, q.Files
	if q.MaxBytes > 0 {
		s.TotalBytes = q.MaxBytes
	}
	if q.MaxFiles > 0 {
		s.TotalInodes = q.MaxFiles
	}
	return s
}

// nearestQuota returns dir or the nearest of its ancestors that has a
// quota, or 0.
func (e *Engine) nearestQuota(dir Ino) Ino {
	for {
		if _, ok := e.quota.dirs[dir]; ok {
			return dir
		}
		if dir == e.root {
			return 0
		}
		d := e.st.peek(dir)
		if d == nil {
			return 0
		}
		dir = e.parentOf(d)
	}
}

// regionOf returns the nearest quota over an entry of directory d, or 0;
// it costs one compare when no quota exists.
func (e *Engine) regionOf(d *node) Ino {
	if e.quota.dirs == nil {
		return 0
	}
	return e.nearestQuota(d.Ino)
}

// regionOfNode returns the nearest quota over the non-directory n (its
// region), or 0.
func (e *Engine) regionOfNode(n *node) Ino { return e.st.owners.get(n.own).region }

// setRegion records q as the nearest quota over the non-directory n (none
// when q is 0); n must have been fetched for writing.
func (e *Engine) setRegion(n *node, q Ino) {
	o := e.st.owners.get(n.own)
	if o.region == q {
		return
	}
	id := e.st.owners.refIn(o.uid, o.gid, q)
	e.st.owners.unref(n.own)
	n.own = id
}

// each calls fn for the quota q and every quota above it, nearest first.
func (e *Engine) eachQuota(q Ino, fn func(u *quotaUse) bool) bool {
	for q != 0 {
		u := e.quota.dirs[q]
		if !fn(u) {
			return false
		}
		if q == e.root {
			return true
		}
		q = e.nearestQuota(e.parentOf(e.st.peek(q)))
	}
	return true
}

// quotaCheck reports EDQUOT if adding files nodes and bytes bytes under q
// would take a quota there or above past its limit.
func (e *Engine) quotaCheck(q Ino, files, bytes uint64) error {
	if q == 0 || files == 0 && bytes == 0 {
		return nil
	}
	if !e.eachQuota(q, func(u *quotaUse) bool { return !u.over(int64(files), int64(bytes)) }) {
		return syscall.EDQUOT
	}
	return nil
}

// over reports whether changing u's usage by files and bytes takes it past
// a limit; a change that does not grow a figure never does.
func (u *quotaUse) over(files, bytes int64) bool {
	return files > 0 && u.MaxFiles > 0 && u.files+uint64(files) > u.MaxFiles ||
		bytes > 0 && u.MaxBytes > 0 && u.bytes+uint64(bytes) > u.MaxBytes
}

// quotaAdd changes the usage of q and every quota above it.
func (e *Engine) quotaAdd(q Ino, files, bytes int64) {
	if q == 0 || files == 0 && bytes == 0 {
		return
	}
	e.eachQuota(q, func(u *quotaUse) bool {
		u.files = uint64(int64(u.files) + files)
		u.bytes = uint64(int64(u.bytes) + bytes)
		return true
	})
}

// quotaCreate checks that one more node fits under the quotas over
// directory d and returns the nearest of them (0 when none is).
func (e *Engine) quotaCreate(d *node) (Ino, error) {
	q := e.regionOf(d)
	return q, e.quotaCheck(q, 1, 0)
}

// quotaCreated counts the new node n under q.
func (e *Engine) quotaCreated(q Ino, n *node) {
	e.ownerCreated(n)
	if q == 0 {
		return
	}
	e.quotaAdd(q, 1, 0)
	if !n.isDir() {
		e.setRegion(n, q)
	}
}

// quotaGone uncounts n, whose last link is gone: a directory's quota goes
// with it.
func (e *Engine) quotaGone(n *node) {
	e.ownerGone(n)
	if e.quota.dirs == nil {
		return
	}
	if n.isDir() {
		if _, ok := e.quota.dirs[n.Ino]; ok {
			e.dropQuota(n.Ino)
			if e.quota.dirs == nil {
				return
			}
		}
		e.quotaAdd(e.nearestQuota(e.parentOf(n)), -1, 0)
		return
	}
	q := e.regionOfNode(n)
	if q == 0 {
		return
	}
	e.setRegion(n, 0)
	e.quotaAdd(q, -1, -int64(bytesOf(n)))
}

// bytesOf is what node n counts for in a quota's bytes.
func bytesOf(n *node) uint64 {
	if n.Mode&S_IFMT == S_IFREG {
		return n.Size
	}
	return 0
}

// quotaGrow checks that regular file n may grow to size under its owner's
// and group's quotas and under the directory quotas, and returns its
// nearest directory quota (0 when none is over it).
func (e *Engine) quotaGrow(n *node, size uint64) (Ino, error) {
	if err := e.ownerGrow(n, size); err != nil {
		return 0, err
	}
	return e.quotaGrowDir(n, size)
}

// quotaGrowDir is quotaGrow for the directory quotas only.
func (e *Engine) quotaGrowDir(n *node, size uint64) (Ino, error) {
	q := e.regionOfNode(n)
	if q == 0 || size <= n.Size {
		return q, nil
	}
	return q, e.quotaCheck(q, 0, size-n.Size)
}

// quotaResized counts regular file n's size change from old for its
// owner and group and under q.
func (e *Engine) quotaResized(q Ino, n *node, old uint64) {
	e.ownerResized(n, old)
	e.quotaResizedDir(q, n, old)
}

// quotaResizedDir is quotaResized for the directory quotas only.
func (e *Engine) quotaResizedDir(q Ino, n *node, old uint64) {
	if q != 0 {
		e.quotaAdd(q, 0, int64(n.Size)-int64(old))
	}
}

// DirPath returns the path of directory ino in this partition, from its
// parents' entries (a walk of each parent's entries: for listings of a
// few directories, such as the quotas).
func (e *Engine) DirPath(ino Ino) (string, error) {
	d, err := e.peekDir(ino)
	if err != nil {
		return "", err
	}
	var names []string
	for d.Ino != e.root {
		slot := e.st.slotOf(d.Ino)
		p := e.st.peek(e.parentOf(d))
		if p == nil {
			return "", syscall.ENOENT
		}
		found := false
		e.st.extraOf(p).dir.each(func(name []byte, s uint32) bool {
			if s == slot {
				names = append(names, string(name))
				found = true
				return false
			}
			return true
		})
		if !found {
			return "", syscall.ENOENT
		}
		d = p
	}
	if len(names) == 0 {
		return "/", nil
	}
	slices.Reverse(names)
	var b []byte
	for _, n := range names {
		b = append(b, '/')
		b = append(b, n...)
	}
	return string(b), nil
}
