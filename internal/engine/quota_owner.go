package engine

import (
	"fmt"
	"slices"
	"syscall"
)

// User and group quotas limit the nodes a uid (or a gid) owns in this
// partition and the bytes of the regular files among them. Every node
// that has a link counts once for its owner and once for its group
// (hard links do not count again; a file whose last link is gone stops
// counting, even while it is open); what the trash holds still counts, as
// it still holds its bytes. A change that would take a user's or a
// group's count past a limit fails with EDQUOT and changes nothing:
// creating a node, growing a file (write, truncate, concat), and chown or
// chgrp, which moves the node and its bytes to the new owner or group. A
// link or a rename changes no owner, and so no user or group quota. The
// limits hold for root as for everyone else.
//
// The limits are the partition's: each partition counts what the user
// owns there. In a federation they are the partition's share of a limit
// for the whole namespace, which the routers split among the partitions
// and move between them (AdjustOwnerQuota, quota_owner_share.go). A file
// that moves to another partition (a rename across partitions) leaves
// the user's usage in the first and counts in the second, which does not
// refuse it.
//
// Usage is kept incrementally for the ids that have a quota only: an
// operation costs one compare when no user or group quota exists and a
// map lookup per id while some do. Setting a quota counts the id's nodes
// once (a scan of the partition's nodes). What is logged is setting and
// removing a quota; a checkpoint holds the limits only, in a section of
// its own that is left out while there is none (so that a partition
// without user or group quotas writes the bytes it wrote before they
// existed), and Load counts the usage again.

// QuotaKind says whose nodes an owner quota counts.
type QuotaKind uint8

const (
	// QuotaUser counts the nodes a uid owns.
	QuotaUser QuotaKind = 1
	// QuotaGroup counts the nodes of a gid.
	QuotaGroup QuotaKind = 2
)

func (k QuotaKind) String() string {
	switch k {
	case QuotaUser:
		return "uid"
	case QuotaGroup:
		return "gid"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// OwnerQuotaLimit is a user or group quota as set.
type OwnerQuotaLimit struct {
	Kind     QuotaKind
	ID       uint32 // the uid or gid
	MaxFiles uint64 // nodes; 0: no limit (with Share: none)
	MaxBytes uint64 // bytes of regular files; 0: no limit (with Share: none)
	// Share: the limits are this partition's share of a limit for the
	// whole namespace (quota_owner_share.go), which may be 0; a share
	// with no limit is math.MaxUint64.
	Share bool
}

// limited reports whether limit is one (0 is no limit, except in a share).
func (l *OwnerQuotaLimit) limited(limit uint64) bool { return limit > 0 || l.Share }

// OwnerQuota is a user or group quota and what the id holds now.
type OwnerQuota struct {
	OwnerQuotaLimit
	Files uint64 // nodes with a link that the id owns, each once
	Bytes uint64 // sizes of the regular files among them
}

// OwnerQuotaMismatch is an owner quota whose kept usage differs from a
// full count.
type OwnerQuotaMismatch struct {
	Kind         QuotaKind
	ID           uint32
	Files, Bytes uint64 // kept
	CountFiles   uint64 // counted
	CountBytes   uint64
}

// ownerUse is one owner quota's limits and the usage kept for it.
type ownerUse struct {
	OwnerQuotaLimit
	files, bytes uint64
}

func (u *ownerUse) quota() OwnerQuota {
	return OwnerQuota{OwnerQuotaLimit: u.OwnerQuotaLimit, Files: u.files, Bytes: u.bytes}
}

func (u *ownerUse) over(files, bytes int64) bool {
	return files > 0 && u.limited(u.MaxFiles) && u.files+uint64(files) > u.MaxFiles ||
		bytes > 0 && u.limited(u.MaxBytes) && u.bytes+uint64(bytes) > u.MaxBytes
}

// ownerQuotaState is the engine's user and group quotas. It belongs to
// the engine's owner goroutine; a freeze shares list only, which is
// replaced on every change and never changed in place.
type ownerQuotaState struct {
	users  map[uint32]*ownerUse // by uid; nil when there is none
	groups map[uint32]*ownerUse // by gid; nil when there is none
	list   []OwnerQuotaLimit    // the limits, by kind and id, for checkpoints; nil when there is none

	stale bool // loaded, and the usage not counted yet (checkQuotas counts it)

	refused OwnerRefusal // the last refusal, until TakeOwnerRefusal; Kind 0: none
}

// OwnerRefusal is the user or group quota that refused a change with
// EDQUOT, and what the change would have added to its usage.
type OwnerRefusal struct {
	Kind  QuotaKind // 0: no owner quota refused (a directory quota did, or nothing)
	ID    uint32
	Files int64 // nodes the change adds
	Bytes int64 // bytes the change adds
}

// TakeOwnerRefusal returns the owner quota that refused the last change
// that an owner quota refused, and forgets it. Called by whoever turns an
// EDQUOT into a reply, right after the call, on the owner goroutine: a
// federation moves unused limits to the partition that ran short.
func (e *Engine) TakeOwnerRefusal() OwnerRefusal {
	r := e.oq.refused
	e.oq.refused = OwnerRefusal{}
	return r
}

// ownerQuotasOn reports whether any user or group quota exists.
func (e *Engine) ownerQuotasOn() bool { return e.oq.list != nil }

func (s *ownerQuotaState) table(k QuotaKind) *map[uint32]*ownerUse {
	if k == QuotaUser {
		return &s.users
	}
	return &s.groups
}

func validKind(k QuotaKind) error {
	if k != QuotaUser && k != QuotaGroup {
		return fmt.Errorf("quota kind %d: %w", k, syscall.EINVAL)
	}
	return nil
}

// SetOwnerQuota sets the limits of the quota of uid or gid id (by kind),
// making one if there is none. Only root may (EPERM). Limits below what
// the id holds now are refused (EDQUOT).
func (e *Engine) SetOwnerQuota(c Cred, kind QuotaKind, id uint32, maxFiles, maxBytes uint64) (OwnerQuota, error) {
	return e.setOwnerQuota(c, OwnerQuotaLimit{Kind: kind, ID: id, MaxFiles: maxFiles, MaxBytes: maxBytes})
}

func (e *Engine) setOwnerQuota(c Cred, lim OwnerQuotaLimit) (OwnerQuota, error) {
	if !c.IsRoot() {
		return OwnerQuota{}, syscall.EPERM
	}
	if err := validKind(lim.Kind); err != nil {
		return OwnerQuota{}, err
	}
	kind, id := lim.Kind, lim.ID
	tab := e.oq.table(kind)
	u, ok := (*tab)[id]
	files, bytes := uint64(0), uint64(0)
	if ok {
		files, bytes = u.files, u.bytes
	} else {
		files, bytes = e.countOwned(kind, id)
	}
	if lim.limited(lim.MaxFiles) && files > lim.MaxFiles || lim.limited(lim.MaxBytes) && bytes > lim.MaxBytes {
		return OwnerQuota{}, fmt.Errorf("quota below usage: %d files and %d bytes in use: %w", files, bytes, syscall.EDQUOT)
	}
	if !ok {
		if *tab == nil {
			*tab = make(map[uint32]*ownerUse)
		}
		u = &ownerUse{files: files, bytes: bytes}
		(*tab)[id] = u
	}
	u.OwnerQuotaLimit = lim
	e.replaceOwnerList()
	return u.quota(), nil
}

// GetOwnerQuota returns the quota of uid or gid id: ENODATA if there is
// none.
func (e *Engine) GetOwnerQuota(kind QuotaKind, id uint32) (OwnerQuota, error) {
	if err := validKind(kind); err != nil {
		return OwnerQuota{}, err
	}
	u, ok := (*e.oq.table(kind))[id]
	if !ok {
		return OwnerQuota{}, syscall.ENODATA
	}
	return u.quota(), nil
}

// RemoveOwnerQuota removes the quota of uid or gid id: ENODATA if there is
// none. Only root may (EPERM).
func (e *Engine) RemoveOwnerQuota(c Cred, kind QuotaKind, id uint32) error {
	if !c.IsRoot() {
		return syscall.EPERM
	}
	if err := validKind(kind); err != nil {
		return err
	}
	tab := e.oq.table(kind)
	if _, ok := (*tab)[id]; !ok {
		return syscall.ENODATA
	}
	delete(*tab, id)
	if len(*tab) == 0 {
		*tab = nil
	}
	e.replaceOwnerList()
	return nil
}

// OwnerQuotas returns every user quota by uid, then every group quota by
// gid.
func (e *Engine) OwnerQuotas() []OwnerQuota {
	out := make([]OwnerQuota, 0, len(e.oq.list))
	for _, l := range e.oq.list {
		out = append(out, (*e.oq.table(l.Kind))[l.ID].quota())
	}
	return out
}

// replaceOwnerList makes a new list of the limits (a freeze may hold the
// old one); nil when there is no owner quota.
func (e *Engine) replaceOwnerList() {
	n := len(e.oq.users) + len(e.oq.groups)
	if n == 0 {
		e.oq = ownerQuotaState{}
		return
	}
	list := make([]OwnerQuotaLimit, 0, n)
	for _, u := range e.oq.users {
		list = append(list, u.OwnerQuotaLimit)
	}
	for _, u := range e.oq.groups {
		list = append(list, u.OwnerQuotaLimit)
	}
	slices.SortFunc(list, cmpOwnerLimit)
	e.oq.list = list
}

func cmpOwnerLimit(a, b OwnerQuotaLimit) int {
	if a.Kind != b.Kind {
		return int(a.Kind) - int(b.Kind)
	}
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// counted reports whether node n counts for its owner and group: it has a
// link.
func counted(n *node) bool { return n.Nlink > 0 }

// countOwned counts the nodes and bytes uid or gid id holds, by a scan of
// every node.
func (e *Engine) countOwned(kind QuotaKind, id uint32) (files, bytes uint64) {
	for _, n := range e.st.all() {
		if !counted(n) {
			continue
		}
		o := e.st.owners.get(n.own)
		if kind == QuotaUser && o.uid == id || kind == QuotaGroup && o.gid == id {
			files++
			bytes += bytesOf(n)
		}
	}
	return files, bytes
}

// countOwners counts, in one scan of every node, the usage of every id
// that has a quota.
func (e *Engine) countOwners() (users, groups map[uint32][2]uint64) {
	users, groups = make(map[uint32][2]uint64, len(e.oq.users)), make(map[uint32][2]uint64, len(e.oq.groups))
	for _, n := range e.st.all() {
		if !counted(n) {
			continue
		}
		o := e.st.owners.get(n.own)
		if _, ok := e.oq.users[o.uid]; ok {
			c := users[o.uid]
			users[o.uid] = [2]uint64{c[0] + 1, c[1] + bytesOf(n)}
		}
		if _, ok := e.oq.groups[o.gid]; ok {
			c := groups[o.gid]
			groups[o.gid] = [2]uint64{c[0] + 1, c[1] + bytesOf(n)}
		}
	}
	return users, groups
}

// CheckOwnerQuotas counts every user and group quota's usage from the
// nodes and returns those whose kept usage differs.
func (e *Engine) CheckOwnerQuotas() []OwnerQuotaMismatch {
	if !e.ownerQuotasOn() {
		return nil
	}
	users, groups := e.countOwners()
	var out []OwnerQuotaMismatch
	for _, l := range e.oq.list {
		u := (*e.oq.table(l.Kind))[l.ID]
		c := users[l.ID]
		if l.Kind == QuotaGroup {
			c = groups[l.ID]
		}
		if u.files != c[0] || u.bytes != c[1] {
			out = append(out, OwnerQuotaMismatch{Kind: l.Kind, ID: l.ID, Files: u.files, Bytes: u.bytes, CountFiles: c[0], CountBytes: c[1]})
		}
	}
	return out
}

// RepairOwnerQuotas sets every user and group quota's usage to a full
// count and returns those whose usage was wrong. Only root may (EPERM).
func (e *Engine) RepairOwnerQuotas(c Cred) ([]OwnerQuotaMismatch, error) {
	if !c.IsRoot() {
		return nil, syscall.EPERM
	}
	bad := e.CheckOwnerQuotas()
	e.recountOwners()
	return bad, nil
}

// recountOwners sets every owner quota's usage to a full count.
func (e *Engine) recountOwners() {
	if !e.ownerQuotasOn() {
		return
	}
	users, groups := e.countOwners()
	for id, u := range e.oq.users {
		u.files, u.bytes = users[id][0], users[id][1]
	}
	for id, u := range e.oq.groups {
		u.files, u.bytes = groups[id][0], groups[id][1]
	}
}

// checkOwnerQuotas is the invariant check's part for owner quotas: the
// list and the maps agree, and every usage equals a full count.
func (e *Engine) checkOwnerQuotas() error {
	if e.oq.list == nil {
		if e.oq.users != nil || e.oq.groups != nil {
			return fmt.Errorf("%w: owner quotas without a list", errQuota)
		}
		return nil
	}
	if e.oq.stale {
		e.recountOwners() // just loaded: the tree has passed its checks
		e.oq.stale = false
	}
	if len(e.oq.list) != len(e.oq.users)+len(e.oq.groups) {
		return fmt.Errorf("%w: %d owner quotas listed, %d kept", errQuota, len(e.oq.list), len(e.oq.users)+len(e.oq.groups))
	}
	for i, l := range e.oq.list {
		u := (*e.oq.table(l.Kind))[l.ID]
		if u == nil || u.OwnerQuotaLimit != l || i > 0 && cmpOwnerLimit(e.oq.list[i-1], l) >= 0 {
			return fmt.Errorf("%w: owner list entry %d (%v %d) does not match", errQuota, i, l.Kind, l.ID)
		}
	}
	if bad := e.CheckOwnerQuotas(); len(bad) > 0 {
		b := bad[0]
		return fmt.Errorf("%w of %v %d: usage %d files %d bytes, counted %d files %d bytes",
			errQuota, b.Kind, b.ID, b.Files, b.Bytes, b.CountFiles, b.CountBytes)
	}
	return nil
}

// ownerDelta is what one change does to the owner quotas: each of up to
// two users and two groups gains or loses nodes and bytes.
type ownerDelta struct {
	k  int
	ch [4]ownerChange
}

type ownerChange struct {
	u            *ownerUse
	files, bytes int64
}

// add counts files and bytes for id of kind, if it has a quota.
func (d *ownerDelta) add(e *Engine, kind QuotaKind, id uint32, files, bytes int64) {
	u := (*e.oq.table(kind))[id]
	if u == nil {
		return
	}
	for i := range d.k {
		if d.ch[i].u == u {
			d.ch[i].files += files
			d.ch[i].bytes += bytes
			return
		}
	}
	d.ch[d.k] = ownerChange{u: u, files: files, bytes: bytes}
	d.k++
}

// node counts node n, owned by uid:gid, as sign times one node and bytes.
func (d *ownerDelta) node(e *Engine, uid, gid uint32, sign int64, bytes uint64) {
	d.add(e, QuotaUser, uid, sign, sign*int64(bytes))
	d.add(e, QuotaGroup, gid, sign, sign*int64(bytes))
}

// check reports EDQUOT if the change takes a growing figure past a limit,
// and keeps which quota refused it for TakeOwnerRefusal.
func (d *ownerDelta) check(e *Engine) error {
	for _, c := range d.ch[:d.k] {
		if c.u.over(c.files, c.bytes) {
			e.oq.refused = OwnerRefusal{Kind: c.u.Kind, ID: c.u.ID, Files: max(c.files, 0), Bytes: max(c.bytes, 0)}
			return syscall.EDQUOT
		}
	}
	return nil
}

// apply changes the usage.
func (d *ownerDelta) apply() {
	for _, c := range d.ch[:d.k] {
		c.u.files = uint64(int64(c.u.files) + c.files)
		c.u.bytes = uint64(int64(c.u.bytes) + c.bytes)
	}
}

// createGID is the group a node that c creates in directory d gets, as
// Linux's inode_init_owner: the directory's with set-group-id, else c's.
func (e *Engine) createGID(c Cred, d *node) uint32 {
	if d.Mode&S_ISGID != 0 {
		return e.gid(d)
	}
	return c.GID
}

// quotaCreateAs is quotaCreate for a node that c creates in d: the owner
// quotas of c's uid and the new node's group must fit one more node too.
func (e *Engine) quotaCreateAs(c Cred, d *node) (Ino, error) {
	if e.ownerQuotasOn() {
		var od ownerDelta
		od.node(e, c.UID, e.createGID(c, d), 1, 0)
		if err := od.check(e); err != nil {
			return 0, err
		}
	}
	return e.quotaCreate(d)
}

// ownerCreated counts the new node n for its owner and group.
func (e *Engine) ownerCreated(n *node) {
	if e.ownerQuotasOn() {
		var od ownerDelta
		od.node(e, e.uid(n), e.gid(n), 1, bytesOf(n))
		od.apply()
	}
}

// ownerGone uncounts n, whose last link is gone.
func (e *Engine) ownerGone(n *node) {
	if e.ownerQuotasOn() {
		var od ownerDelta
		od.node(e, e.uid(n), e.gid(n), -1, bytesOf(n))
		od.apply()
	}
}

// ownerGrow checks that regular file n may grow to size under its owner's
// and group's quotas.
func (e *Engine) ownerGrow(n *node, size uint64) error {
	if !e.ownerQuotasOn() || !counted(n) || size <= n.Size {
		return nil
	}
	var od ownerDelta
	od.add(e, QuotaUser, e.uid(n), 0, int64(size-n.Size))
	od.add(e, QuotaGroup, e.gid(n), 0, int64(size-n.Size))
	return od.check(e)
}

// ownerResized counts regular file n's size change from old.
func (e *Engine) ownerResized(n *node, old uint64) {
	if !e.ownerQuotasOn() || !counted(n) {
		return
	}
	var od ownerDelta
	d := int64(n.Size) - int64(old)
	od.add(e, QuotaUser, e.uid(n), 0, d)
	od.add(e, QuotaGroup, e.gid(n), 0, d)
	od.apply()
}

// ownerSetAttr is what SetAttr s does to the owner quotas of node n: a
// new owner or group takes the node and its bytes over, at its new size
// if s sets one. It returns EDQUOT if a quota would pass its limit.
func (e *Engine) ownerSetAttr(n *node, s SetAttr) (ownerDelta, error) {
	var od ownerDelta
	if !e.ownerQuotasOn() || !counted(n) || s.Valid&(SetUID|SetGID|SetSize) == 0 {
		return od, nil
	}
	uid, gid := e.uid(n), e.gid(n)
	newUID, newGID, size := uid, gid, bytesOf(n)
	if s.Valid&SetUID != 0 {
		newUID = s.UID
	}
	if s.Valid&SetGID != 0 {
		newGID = s.GID
	}
	if s.Valid&SetSize != 0 && n.Mode&S_IFMT == S_IFREG {
		size = s.Size
	}
	od.node(e, uid, gid, -1, bytesOf(n))
	od.node(e, newUID, newGID, 1, size)
	return od, od.check(e)
}
