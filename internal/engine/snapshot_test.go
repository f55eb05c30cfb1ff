package engine

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// get returns v, panicking (failing the test) on err.
func get[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func mustCheck(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

// sliceOf returns the one slice id of file path.
func sliceOf(t *testing.T, e *Engine, path string) uint64 {
	t.Helper()
	a := get(e.Resolve(credRoot, path, false))
	cs := e.chunks(e.st.peek(a.Ino))
	if len(cs) != 1 || len(cs[0].slices) != 1 {
		t.Fatalf("%s: chunks %+v, want one slice", path, cs)
	}
	return cs[0].slices[0].ID
}

func TestClone(t *testing.T) {
	e, want := trashTree(t)
	now := trashHour + 1
	a := want["/a"]
	c := get(e.Clone(credRoot, a.Ino, e.Root(), "c", now))
	mustCheck(t, e)
	if c.Ino == a.Ino || c.Mode != a.Mode || c.UID != a.UID || c.Nlink != a.Nlink {
		t.Fatalf("clone root %+v, source %+v", c, a)
	}
	for _, p := range []string{"/b", "/b/f", "/s", "/g", "/b/g2"} {
		src, cp := want["/a"+p], get(e.Resolve(credRoot, "/c"+p, false))
		if cp.Ino == src.Ino || cp.Mode != src.Mode || cp.UID != src.UID || cp.Size != src.Size || cp.Mtime != src.Mtime {
			t.Fatalf("%s: copy %+v, source %+v", p, cp, src)
		}
	}
	// Hard links within the tree stay links of one node.
	g, g2 := get(e.Resolve(credRoot, "/c/g", false)), get(e.Resolve(credRoot, "/c/b/g2", false))
	if g.Ino != g2.Ino || g.Nlink != 2 {
		t.Fatalf("copied links: %+v %+v", g, g2)
	}
	if got := get(e.Readlink(get(e.Resolve(credRoot, "/c/s", false)).Ino)); got != "b/f" {
		t.Fatalf("symlink target %q", got)
	}
	if v := get(e.GetXattr(credRoot, get(e.Resolve(credRoot, "/c/b/f", false)).Ino, "user.k")); string(v) != "v" {
		t.Fatalf("xattr %q", v)
	}
	// The data is shared: one slice, used twice.
	id := sliceOf(t, e, "/a/b/f")
	if sliceOf(t, e, "/c/b/f") != id || e.shared[id] != 1 {
		t.Fatalf("slice %d shared %d times", id, e.shared[id])
	}
	// Writing the copy makes a new slice; the source keeps its own.
	cf := get(e.Resolve(credRoot, "/c/b/f", false))
	nid := allocOne(t, e)
	get(e.Commit(credRoot, cf.Ino, []SliceWrite{{Slice: Slice{ID: nid, Size: 10, Len: 10}}}, 0, 0, now))
	if sliceOf(t, e, "/a/b/f") != id || e.shared[id] != 0 || e.GarbageLen() != 0 {
		t.Fatalf("after writing the copy: source slice %d, shared %d, garbage %d", sliceOf(t, e, "/a/b/f"), e.shared[id], e.GarbageLen())
	}
	mustCheck(t, e)

	// Errors.
	_, err := e.Clone(credRoot, a.Ino, e.Root(), "c", now)
	wantErrno(t, "clone onto a taken name", err, syscall.EEXIST)
	_, err = e.Clone(credU2, a.Ino, e.Root(), "d", now)
	wantErrno(t, "clone into a directory the caller may not write", err, syscall.EACCES)
	_, err = e.Clone(credRoot, MakeIno(2, 5), e.Root(), "d", now)
	wantErrno(t, "clone across partitions", err, syscall.EXDEV)
	tmp := get(e.Mkdir(credRoot, e.Root(), "tmp", 0o777, now))
	_, err = e.Clone(credU2, a.Ino, tmp.Ino, "d", now)
	wantErrno(t, "clone of a tree the caller may not read", err, syscall.EACCES)
	if len(get(pathReaddirAll(e, credRoot, tmp.Ino, 0))) != 0 {
		t.Fatal("a failed clone left something")
	}
	// A clone by another user is theirs.
	f := get(e.Mknod(credU1, tmp.Ino, "f", S_IFREG|0o4755, 0, now))
	cu := get(e.Clone(credU2, f.Ino, tmp.Ino, "f2", now))
	if cu.UID != credU2.UID || cu.GID != credU2.GID || cu.Mode&S_ISUID != 0 {
		t.Fatalf("clone by another user: %+v", cu)
	}
	// Into its own subtree: a copy of the tree as it was.
	get(e.Clone(credRoot, a.Ino, a.Ino, "self", now))
	if _, err := e.Resolve(credRoot, "/a/self/self", false); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("copy into itself copied itself: %v", err)
	}
	mustCheck(t, e)
}

func TestCloneQuota(t *testing.T) {
	e, want := trashTree(t)
	now := trashHour + 1
	q := get(e.Mkdir(credRoot, e.Root(), "q", 0o777, now))
	get(e.SetQuota(credRoot, q.Ino, 4, 0))
	// /a holds 4 nodes below it (g and b/g2 are one) plus itself: 5 > 4.
	_, err := e.Clone(credRoot, want["/a"].Ino, q.Ino, "a", now)
	wantErrno(t, "clone over a quota", err, syscall.EDQUOT)
	get(e.SetQuota(credRoot, q.Ino, 5, 0))
	get(e.Clone(credRoot, want["/a"].Ino, q.Ino, "a", now))
	u := get(e.GetQuota(q.Ino))
	if u.Files != 5 || u.Bytes != 10 {
		t.Fatalf("quota usage after the clone: %+v", u)
	}
	mustCheck(t, e)
	_, err = e.Mknod(credRoot, q.Ino, "x", S_IFREG|0o644, 0, now)
	wantErrno(t, "create past the quota the clone filled", err, syscall.EDQUOT)
}

func TestSnapshotReadOnly(t *testing.T) {
	e, want := trashTree(t)
	now := trashHour + 1
	a := want["/a"]
	_, err := e.SnapshotCreate(credU2, a.Ino, "s1", now)
	wantErrno(t, "snapshot by a stranger", err, syscall.EPERM)
	info := get(e.SnapshotCreate(credU1, a.Ino, "s1", now))
	if info.Nodes != 5 || info.Bytes != 10 || info.Created != now {
		t.Fatalf("snapshot info %+v", info)
	}
	mustCheck(t, e)
	_, err = e.SnapshotCreate(credU1, a.Ino, "s1", now)
	if !errors.Is(err, ErrSnapshotExists) || !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("second snapshot of one name: %v", err)
	}
	f := get(e.Resolve(credU1, "/a/.snapshot/s1/b/f", false))
	if f.Ino == want["/a/b/f"].Ino || f.Size != 10 {
		t.Fatalf("snapshot file %+v", f)
	}
	sd := get(e.Resolve(credU1, "/a/.snapshot/s1", false))
	sb := get(e.Resolve(credU1, "/a/.snapshot/s1/b", false))
	// Reads work.
	get(e.Open(credU1, f.Ino, OpenReadOnly))
	get(pathReaddirAll(e, credU1, sb.Ino, 0))
	ents := get(pathReaddirAll(e, credU1, get(e.Lookup(credU1, a.Ino, SnapshotDir)).Ino, 0))
	if len(ents) != 1 || ents[0].Name != "s1" {
		t.Fatalf(".snapshot lists %+v", ents)
	}
	// Every change fails with EROFS, as root too.
	for _, c := range []Cred{credRoot, credU1} {
		for what, err := range map[string]error{
			"mknod":    second(e.Mknod(c, sb.Ino, "x", S_IFREG|0o644, 0, now)),
			"mkdir":    second(e.Mkdir(c, sd.Ino, "x", 0o755, now)),
			"symlink":  second(e.Symlink(c, sb.Ino, "x", "y", now)),
			"link in":  second(e.Link(c, want["/a/g"].Ino, sb.Ino, "x", now)),
			"link of":  second(e.Link(c, f.Ino, a.Ino, "x", now)),
			"unlink":   e.Unlink(c, sb.Ino, "f", now),
			"rmdir":    e.Rmdir(c, sd.Ino, "b", now),
			"rename":   e.Rename(c, sb.Ino, "f", a.Ino, "x", 0, now),
			"into":     e.Rename(c, a.Ino, "g", sb.Ino, "x", 0, now),
			"setattr":  second(e.SetAttr(c, f.Ino, SetAttr{Valid: SetMode, Mode: 0o777}, now)),
			"trunc":    second(e.SetAttr(c, f.Ino, SetAttr{Valid: SetSize}, now)),
			"xattr":    e.SetXattr(c, f.Ino, "user.x", []byte("1"), 0, now),
			"rmxattr":  e.RemoveXattr(c, f.Ino, "user.k", now),
			"open":     second(e.Open(c, f.Ino, OpenWriteOnly)),
			"commit":   second(e.Commit(c, f.Ino, nil, 20, 0, now)),
			"rm snap":  e.Rmdir(c, get(e.Lookup(c, a.Ino, SnapshotDir)).Ino, "s1", now),
			"clone in": second(e.Clone(c, want["/a/g"].Ino, sb.Ino, "x", now)),
		} {
			if !errors.Is(err, syscall.EROFS) {
				t.Errorf("%s as %s under .snapshot: %v, want EROFS", what, credName(c), err)
			}
		}
	}
	_, err = e.Mkdir(credU1, a.Ino, SnapshotDir, 0o755, now)
	wantErrno(t, "mkdir .snapshot where snapshots are", err, syscall.EEXIST)
	wantErrno(t, "rmdir of a directory with snapshots", e.Rmdir(credRoot, e.Root(), "a", now), syscall.EBUSY)
	_, err = e.SnapshotCreate(credRoot, sd.Ino, "x", now)
	wantErrno(t, "snapshot of a snapshot", err, syscall.EROFS)
	// A clone out of a snapshot is writable.
	r := get(e.Clone(credU1, f.Ino, a.Ino, "restored", now))
	get(e.SetAttr(credU1, r.Ino, SetAttr{Valid: SetMode, Mode: 0o600}, now))
	mustCheck(t, e)
}

func second[T any](_ T, err error) error { return err }

func TestSnapshotKeepsOldContents(t *testing.T) {
	e, want := trashTree(t)
	now := trashHour + 1
	a, f := want["/a"], want["/a/b/f"]
	get(e.SnapshotCreate(credRoot, a.Ino, "s1", now))
	old := sliceOf(t, e, "/a/b/f")
	// Overwrite, grow, chmod, add and remove entries after the snapshot.
	nid := allocOne(t, e)
	get(e.Commit(credU1, f.Ino, []SliceWrite{{Slice: Slice{ID: nid, Size: 30, Len: 30}}}, 0, 0, now+1))
	get(e.SetAttr(credU1, f.Ino, SetAttr{Valid: SetMode, Mode: 0o600}, now+1))
	get(e.Mknod(credU1, a.Ino, "new", S_IFREG|0o644, 0, now+1))
	if err := e.Unlink(credU1, a.Ino, "s", now+1); err != nil {
		t.Fatal(err)
	}
	sf := get(e.Resolve(credRoot, "/a/.snapshot/s1/b/f", false))
	if sf.Size != 10 || sf.Mode&0o777 != 0o640 || sliceOf(t, e, "/a/.snapshot/s1/b/f") != old {
		t.Fatalf("snapshot file after changes: %+v", sf)
	}
	if _, err := e.Resolve(credRoot, "/a/.snapshot/s1/s", false); err != nil {
		t.Fatalf("removed symlink gone from the snapshot: %v", err)
	}
	changes, trunc := must2[[]SnapshotChange, bool](t)(e.SnapshotDiff(credRoot, a.Ino, "s1", ""))
	got := fmt.Sprint(changes)
	wantDiff := fmt.Sprint([]SnapshotChange{
		{'M', ".", S_IFDIR}, {'M', "./b/f", S_IFREG}, {'+', "./new", S_IFREG}, {'-', "./s", S_IFLNK},
	})
	if got != wantDiff || trunc {
		t.Fatalf("diff %s, want %s", got, wantDiff)
	}
	get(e.SnapshotCreate(credRoot, a.Ino, "s2", now+2))
	changes, _ = must2[[]SnapshotChange, bool](t)(e.SnapshotDiff(credRoot, a.Ino, "s1", "s2"))
	if fmt.Sprint(changes) != wantDiff {
		t.Fatalf("diff s1 s2 %v", changes)
	}
	changes, _ = must2[[]SnapshotChange, bool](t)(e.SnapshotDiff(credRoot, a.Ino, "s2", ""))
	if len(changes) != 0 {
		t.Fatalf("diff of a snapshot just taken: %v", changes)
	}
	_, _, err := e.SnapshotDiff(credRoot, a.Ino, "nope", "")
	if !errors.Is(err, ErrSnapshotUnknown) {
		t.Fatalf("diff of an unknown snapshot: %v", err)
	}
	list := get(e.SnapshotList(a.Ino))
	if len(list) != 2 || list[0].Name != "s1" || list[1].Name != "s2" || list[1].Bytes != 30 {
		t.Fatalf("list %+v", list)
	}
	mustCheck(t, e)
}

func must2[A, B any](t *testing.T) func(A, B, error) (A, B) {
	return func(a A, b B, err error) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

func TestSnapshotRemoveFrees(t *testing.T) {
	e, want := trashTree(t)
	e.SetTrashDays(0)
	now := trashHour + 1
	a := want["/a"]
	before := e.Len()
	get(e.SnapshotCreate(credRoot, a.Ino, "s1", now))
	get(e.SnapshotCreate(credRoot, e.Root(), "whole", now))
	old := sliceOf(t, e, "/a/b/f")
	// The source file goes: its slice stays, named by two snapshots.
	if err := e.Unlink(credU1, want["/a/b"].Ino, "f", now); err != nil {
		t.Fatal(err)
	}
	if e.GarbageLen() != 0 || e.shared[old] != 1 {
		t.Fatalf("garbage %d, shared %d after the source went", e.GarbageLen(), e.shared[old])
	}
	wantErrno(t, "rm of an unknown snapshot", e.SnapshotRemove(credRoot, a.Ino, "nope", now), syscall.ENOENT)
	wantErrno(t, "rm by a stranger", e.SnapshotRemove(credU2, a.Ino, "s1", now), syscall.EPERM)
	if err := e.SnapshotRemove(credRoot, a.Ino, "s1", now); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, e)
	if e.GarbageLen() != 0 {
		t.Fatal("a slice another snapshot names became garbage")
	}
	if err := e.SnapshotRemove(credRoot, e.Root(), "whole", now); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, e)
	refs, _ := e.ListGarbage(0, 0, 0)
	if len(refs) != 1 || refs[0].ID != old {
		t.Fatalf("garbage after the last snapshot went: %+v, want slice %d", refs, old)
	}
	if e.Len() != before-1 {
		t.Fatalf("%d nodes, want %d", e.Len(), before-1)
	}
	if _, err := e.Lookup(credRoot, e.Root(), SnapshotArea); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("the area stayed: %v", err)
	}
	_, err := e.Mkdir(credRoot, e.Root(), SnapshotArea, 0o755, now)
	wantErrno(t, "mkdir of the area's name", err, syscall.EPERM)
	if err := e.Rmdir(credRoot, e.Root(), "a", now); err != nil && !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir once its snapshots are gone: %v", err)
	}
}

// TestSnapshotCheckpoint: snapshots, their read-only ranges and the
// slices' use counts come back from a checkpoint, which is the same bytes
// again, and an engine that replays the same operations, with directories
// packed between them, ends in the same checkpoint.
func TestSnapshotCheckpoint(t *testing.T) {
	run := func(pack bool) *Engine {
		e, want := trashTree(t)
		now := trashHour + 1
		if pack {
			e.CompactIdle(1 << 20)
			e.CompactIdle(1 << 20)
		}
		get(e.SnapshotCreate(credRoot, want["/a"].Ino, "s1", now))
		get(e.Clone(credRoot, want["/a"].Ino, e.Root(), "c", now))
		if pack {
			e.CompactIdle(1 << 20)
			e.CompactIdle(1 << 20)
		}
		get(e.SnapshotCreate(credRoot, e.Root(), "all", now))
		get(e.SnapshotCreate(credRoot, want["/a/b"].Ino, "b1", now))
		if err := e.SnapshotRemove(credRoot, e.Root(), "all", now); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := run(false)
	var b1, b2, b3 bytes.Buffer
	if err := e.WriteCheckpoint(&b1); err != nil {
		t.Fatal(err)
	}
	if err := run(true).WriteCheckpoint(&b3); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b3.Bytes()) {
		t.Fatal("the same operations with packing between them made another checkpoint")
	}
	l := get(Load(bytes.NewReader(b1.Bytes())))
	if err := l.WriteCheckpoint(&b2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Fatal("checkpoint of the loaded engine differs")
	}
	if fmt.Sprint(l.shared) != fmt.Sprint(e.shared) {
		t.Fatalf("shared counts %v after load, %v before", l.shared, e.shared)
	}
	f := get(l.Resolve(credRoot, "/a/.snapshot/s1/b/f", false))
	wantErrno(t, "setattr in a loaded snapshot", second(l.SetAttr(credRoot, f.Ino, SetAttr{Valid: SetMode, Mode: 0}, 1)), syscall.EROFS)
	mustCheck(t, l)
	for _, dir := range []string{"/a", "/a/b"} {
		d := get(e.Resolve(credRoot, dir, false))
		x, y := get(e.SnapshotList(d.Ino)), get(l.SnapshotList(d.Ino))
		if fmt.Sprint(x) != fmt.Sprint(y) || len(x) != 1 {
			t.Fatalf("%s: snapshots %+v after load, %+v before", dir, y, x)
		}
	}
}

// TestSnapshotCheckFindsDamage: Check notices a use count or range that
// does not match the tree.
func TestSnapshotCheckFindsDamage(t *testing.T) {
	e, want := trashTree(t)
	get(e.SnapshotCreate(credRoot, want["/a"].Ino, "s1", trashHour))
	id := sliceOf(t, e, "/a/b/f")
	e.shared[id]++
	if err := e.Check(); err == nil {
		t.Fatal("Check passed an extra use")
	}
	e.shared[id]--
	e.snap.ranges[0].hi++
	if err := e.Check(); err == nil {
		t.Fatal("Check passed a wrong range")
	}
}

// TestCloneOwnerQuota: a copy the caller is to own counts against the
// caller's user quota, and is refused whole when it would pass the limit.
func TestCloneOwnerQuota(t *testing.T) {
	e, want := trashTree(t)
	now := trashHour + 1
	q := get(e.Mkdir(credRoot, e.Root(), "q", 0o777, now))
	get(e.SetOwnerQuota(credRoot, QuotaUser, credU1.UID, 12, 0))
	mustOwnerQuota(t, e, QuotaUser, credU1.UID, 5, 10) // /a's five nodes
	get(e.Clone(credU1, want["/a"].Ino, q.Ino, "a1", now))
	mustOwnerQuota(t, e, QuotaUser, credU1.UID, 10, 20)
	_, err := e.Clone(credU1, want["/a"].Ino, q.Ino, "a2", now)
	wantErrno(t, "clone past the user quota", err, syscall.EDQUOT)
	mustOwnerQuota(t, e, QuotaUser, credU1.UID, 10, 20)
	if _, err := e.Resolve(credRoot, "/q/a2", false); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("a refused clone left %v", err)
	}
	mustCheck(t, e)
}

// TestSnapshotBusyBareErrno: removing or replacing a directory that has
// snapshots fails with EBUSY itself, not an error wrapping it, as every
// namespace call's errors are bare errnos.
func TestSnapshotBusyBareErrno(t *testing.T) {
	e, want := trashTree(t)
	now := trashHour + 1
	b := want["/a/b"]
	get(e.SnapshotCreate(credRoot, b.Ino, "s1", now))
	empty := get(e.Mkdir(credRoot, want["/a"].Ino, "empty", 0o755, now))
	get(e.SnapshotCreate(credRoot, empty.Ino, "s1", now))
	x := get(e.Mkdir(credRoot, want["/a"].Ino, "x", 0o755, now))
	for what, err := range map[string]error{
		"rmdir":           e.Rmdir(credRoot, want["/a"].Ino, "empty", now),
		"unlink":          e.Unlink(credRoot, want["/a"].Ino, "empty", now),
		"rename over":     e.Rename(credRoot, want["/a"].Ino, "x", want["/a"].Ino, "empty", 0, now),
		"rename exchange": e.Rename(credRoot, want["/a"].Ino, "x", want["/a"].Ino, "b", RenameExchange, now),
	} {
		if err != syscall.EBUSY {
			t.Errorf("%s of a directory with snapshots: %#v, want the bare EBUSY", what, err)
		}
	}
	if got := get(e.Lookup(credRoot, want["/a"].Ino, "x")); got.Ino != x.Ino {
		t.Fatalf("a refused rename moved /a/x: %+v", got)
	}
	mustCheck(t, e)
}

// TestSnapshotAreaTakesNoQuota: the snapshot area is read only, so no
// quota is set on it or in it, and a snapshot counts under the root's
// quotas alone, which hold what lies below them.
func TestSnapshotAreaTakesNoQuota(t *testing.T) {
	e, want := trashTree(t)
	now := trashHour + 1
	get(e.SnapshotCreate(credRoot, want["/a/b"].Ino, "s1", now))
	area := get(e.Lookup(credRoot, e.Root(), SnapshotArea))
	for _, ino := range []Ino{area.Ino, get(e.Lookup(credRoot, want["/a/b"].Ino, SnapshotDir)).Ino,
		get(e.Resolve(credRoot, "/a/b/.snapshot/s1", false)).Ino} {
		_, err := e.SetQuota(credRoot, ino, 4, 0)
		wantErrno(t, "quota in the snapshot area", err, syscall.EROFS)
	}
	q0 := get(e.SetQuota(credRoot, e.Root(), 100, 0))
	info := get(e.SnapshotCreate(credRoot, want["/a"].Ino, "s2", now))
	// The snapshot's nodes and its directory in the area.
	if q := get(e.GetQuota(e.Root())); q.Files != q0.Files+info.Nodes+1 {
		t.Fatalf("root quota counts %d nodes after a snapshot of %d, %d before", q.Files, info.Nodes, q0.Files)
	}
	mustCheck(t, e)
}

// TestSnapshotDiffUnderQuota: a snapshot of a directory under a quota
// shows no change of its files, which its copies, counted under the
// root's quotas instead, hold unchanged.
func TestSnapshotDiffUnderQuota(t *testing.T) {
	e, want := trashTree(t)
	now := trashHour + 1
	get(e.SetQuota(credRoot, want["/a"].Ino, 100, 0))
	get(e.SnapshotCreate(credRoot, want["/a"].Ino, "s1", now))
	changes, _ := must2[[]SnapshotChange, bool](t)(e.SnapshotDiff(credRoot, want["/a"].Ino, "s1", ""))
	if len(changes) != 0 {
		t.Fatalf("diff of a snapshot just taken under a quota: %v", changes)
	}
	get(e.SetAttr(credRoot, want["/a/b/f"].Ino, SetAttr{Valid: SetUID, UID: credU2.UID}, now+1))
	changes, _ = must2[[]SnapshotChange, bool](t)(e.SnapshotDiff(credRoot, want["/a"].Ino, "s1", ""))
	if fmt.Sprint(changes) != fmt.Sprint([]SnapshotChange{{'M', "./b/f", S_IFREG}}) {
		t.Fatalf("diff after a chown: %v", changes)
	}
}
