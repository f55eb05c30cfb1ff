package engine

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"
)

// trashHour is a time (ns) in the hour 2026-12-02-10 UTC.
var trashHour = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).UnixNano()

// trashTree makes /a (0750, credU1) holding b/f (a file of 10 bytes, mode
// 0640, with an xattr), a symlink and a second file with two links.
func trashTree(t *testing.T) (*Engine, map[string]Attr) {
	t.Helper()
	e := New(1, 1)
	e.SetTrashDays(1)
	now := trashHour
	mk := func(a Attr, err error) Attr {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := mk(e.Mkdir(credRoot, e.Root(), "a", 0o777, now))
	mk(e.SetAttr(credRoot, a.Ino, SetAttr{Valid: SetUID | SetGID, UID: credU1.UID, GID: credU1.GID}, now))
	b := mk(e.Mkdir(credU1, a.Ino, "b", 0o750, now))
	f := mk(e.Mknod(credU1, b.Ino, "f", S_IFREG|0o640, 0, now))
	id := allocOne(t, e)
	mk(e.Commit(credU1, f.Ino, []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}}}, 0, 0, now))
	if err := e.SetXattr(credU1, f.Ino, "user.k", []byte("v"), 0, now); err != nil {
		t.Fatal(err)
	}
	mk(e.Symlink(credU1, a.Ino, "s", "b/f", now))
	g := mk(e.Mknod(credU1, a.Ino, "g", S_IFREG|0o600, 0, now))
	mk(e.Link(credU1, g.Ino, b.Ino, "g2", now))
	want := map[string]Attr{}
	for _, p := range []string{"/a", "/a/b", "/a/b/f", "/a/s", "/a/g", "/a/b/g2"} {
		want[p] = mk(e.Resolve(credRoot, p, false))
	}
	return e, want
}

// rmR removes the tree at path child by child, as rm -r does.
func rmR(t *testing.T, e *Engine, path string, now int64) {
	t.Helper()
	a, err := e.Resolve(credRoot, path, false)
	if err != nil {
		t.Fatal(err)
	}
	if a.IsDir() {
		ents, err := pathReaddirAll(e, credRoot, a.Ino, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ents {
			if d.Name != "." && d.Name != ".." {
				rmR(t, e, path+"/"+d.Name, now)
			}
		}
		if err := pathRmdir(e, credRoot, path, now); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := pathUnlink(e, credRoot, path, now); err != nil {
		t.Fatal(err)
	}
}

func TestTrashRemoveAndRestoreTree(t *testing.T) {
	e, want := trashTree(t)
	used := e.Statfs().UsedBytes
	later := trashHour + int64(30*time.Minute)
	rmR(t, e, "/a", later)
	if _, err := e.Resolve(credRoot, "/a", false); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("/a after rm -r: %v", err)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if e.Statfs().UsedBytes != used {
		t.Fatalf("used %d after rm -r, want %d kept by the trash", e.Statfs().UsedBytes, used)
	}
	files, bytesHeld := e.TrashUsage()
	// a, b, f, s, g (g2 was a second link: it went, g stayed until its own unlink).
	if files != 5 || bytesHeld != 10 {
		t.Fatalf("trash holds %d files %d bytes, want 5 and 10", files, bytesHeld)
	}
	list := e.TrashList()
	paths := map[string]bool{}
	for _, te := range list {
		if te.Hour != "2026-12-02-10" {
			t.Fatalf("entry %+v in hour %s", te, te.Hour)
		}
		paths[te.Path] = true
	}
	for _, p := range []string{"/a", "/a/b", "/a/b/f", "/a/s", "/a/g"} {
		if !paths[p] {
			t.Fatalf("trash list %+v lacks %s", list, p)
		}
	}
	// The trash is root's alone.
	tr, err := e.Resolve(credRoot, "/"+TrashName, false)
	if err != nil || tr.UID != 0 || tr.Mode&0o777 != 0o700 {
		t.Fatalf("trash %+v %v", tr, err)
	}
	if _, err := e.Resolve(credU1, "/"+TrashName+"/2026-12-02-10", false); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("user into the trash: %v", err)
	}
	if _, err := e.TrashRestoreHour(credU1, "2026-12-02-10", later); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("restore by a user: %v", err)
	}
	// Restoring the file first brings its directories back with it.
	var fEntry TrashEntry
	for _, te := range list {
		if te.Path == "/a/b/f" {
			fEntry = te
		}
	}
	p, err := e.TrashRestore(credRoot, fEntry.Hour, fEntry.Name, later+1)
	if err != nil || strings.Join(p, " ") != "/a /a/b /a/b/f" {
		t.Fatalf("restore f: %q %v", p, err)
	}
	restored, err := e.TrashRestoreHour(credRoot, "2026-12-02-10", later+2)
	if err != nil || strings.Join(restored, " ") != "/a/s /a/g" {
		t.Fatalf("restore the hour: %v %v", restored, err)
	}
	for p, w := range want {
		if p == "/a/b/g2" {
			continue // a second link of g: rm -r removed it, and only the node goes to the trash
		}
		// A directory's mtime is that of the last change of its entries: the restore's.
		a, err := e.Resolve(credRoot, p, false)
		if err != nil {
			t.Fatalf("%s after restore: %v", p, err)
		}
		if a.Ino != w.Ino || a.Mode != w.Mode || a.UID != w.UID || a.GID != w.GID || a.Size != w.Size || !a.IsDir() && a.Mtime != w.Mtime {
			t.Fatalf("%s after restore: %s, want %s", p, fmtAttr(a), fmtAttr(w))
		}
	}
	if v, err := e.GetXattr(credU1, want["/a/b/f"].Ino, "user.k"); err != nil || !bytes.Equal(v, []byte("v")) {
		t.Fatalf("xattr after restore: %q %v", v, err)
	}
	if _, views, err := e.ReadChunks(want["/a/b/f"].Ino, 0, 1); err != nil || len(views) != 1 || views[0].Slices[0].ID == 0 {
		t.Fatalf("contents after restore: %+v %v", views, err)
	}
	if e.TrashList() != nil {
		t.Fatalf("trash after restoring all: %+v", e.TrashList())
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTrashRestoreClash(t *testing.T) {
	e, _ := trashTree(t)
	if err := pathUnlink(e, credRoot, "/a/s", trashHour); err != nil {
		t.Fatal(err)
	}
	if _, err := pathSymlink(e, credU1, "x", "/a/s", trashHour); err != nil {
		t.Fatal(err)
	}
	list := e.TrashList()
	if len(list) != 1 {
		t.Fatalf("trash %+v", list)
	}
	_, err := e.TrashRestore(credRoot, list[0].Hour, list[0].Name, trashHour)
	if !errors.Is(err, syscall.EEXIST) || err.Error() != "restore /a/s: file exists" {
		t.Fatalf("restore onto a taken name: %v", err)
	}
	if _, err := e.TrashRestore(credRoot, list[0].Hour, "1-2-nope", trashHour); !errors.Is(err, ErrNotInTrash) {
		t.Fatalf("restore of an unknown entry: %v", err)
	}
	// A clash on a directory that has to come back first changes nothing.
	rmR(t, e, "/a", trashHour)
	if _, err := pathMkdir(e, credRoot, "/a", 0o755, trashHour); err != nil {
		t.Fatal(err)
	}
	before := e.TrashList()
	var f TrashEntry
	for _, te := range before {
		if te.Path == "/a/b/f" {
			f = te
		}
	}
	done, err := e.TrashRestore(credRoot, f.Hour, f.Name, trashHour)
	if done != nil || err == nil || err.Error() != "restore /a: file exists" {
		t.Fatalf("restore below a clashing directory: %v %v", done, err)
	}
	if len(e.TrashList()) != len(before) {
		t.Fatalf("trash changed by a failed restore: %+v", e.TrashList())
	}
	if _, err := e.Resolve(credRoot, "/a/b", false); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("/a/b after a failed restore: %v", err)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTrashRenameReplacesIntoTrash(t *testing.T) {
	e, want := trashTree(t)
	if _, err := pathMknod(e, credU1, "/a/new", S_IFREG|0o600, 0, trashHour); err != nil {
		t.Fatal(err)
	}
	if err := pathRename(e, credU1, "/a/new", "/a/b/f", 0, trashHour); err != nil {
		t.Fatal(err)
	}
	list := e.TrashList()
	if len(list) != 1 || list[0].Ino != want["/a/b/f"].Ino || list[0].Path != "/a/b/f" || list[0].Bytes != 10 {
		t.Fatalf("trash after a replacing rename: %+v", list)
	}
	// A second link's removal frees nothing and trashes nothing.
	if err := pathUnlink(e, credU1, "/a/b/g2", trashHour); err != nil {
		t.Fatal(err)
	}
	if len(e.TrashList()) != 1 {
		t.Fatalf("trash after removing a second link: %+v", e.TrashList())
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTrashExpireAndPurge(t *testing.T) {
	e, _ := trashTree(t)
	used := e.Statfs().UsedBytes
	rmR(t, e, "/a/b", trashHour)
	rmR(t, e, "/a/g", trashHour+int64(5*time.Hour))
	// Not a day after the first hour ended: nothing goes.
	if f, _, err := e.ExpireTrash(trashHour + int64(24*time.Hour)); err != nil || f != 0 {
		t.Fatalf("expire too early: %d %v", f, err)
	}
	f, b, err := e.ExpireTrash(trashHour + int64(25*time.Hour))
	if err != nil || f != 2 || b != 10 {
		t.Fatalf("expire of the first hour: %d files %d bytes %v, want b and f, 10 bytes", f, b, err)
	}
	if e.Statfs().UsedBytes != used-10 {
		t.Fatalf("used %d after expiry, want %d", e.Statfs().UsedBytes, used-10)
	}
	if g, _ := e.ListGarbage(0, 0, 0); len(g) != 1 {
		t.Fatalf("garbage after expiry: %v", g)
	}
	list := e.TrashList()
	if len(list) != 1 || list[0].Hour != "2026-12-02-15" || !strings.HasSuffix(list[0].Name, "-g") {
		t.Fatalf("trash after expiry: %+v", list)
	}
	if _, _, err := e.TrashPurge(credU1, math.MaxInt64, trashHour); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("purge by a user: %v", err)
	}
	if f, _, err := e.TrashPurge(credRoot, math.MaxInt64, trashHour+int64(26*time.Hour)); err != nil || f != 1 {
		t.Fatalf("purge all: %d %v", f, err)
	}
	if files, _ := e.TrashUsage(); files != 0 {
		t.Fatalf("trash holds %d after purge", files)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTrashOffFrees(t *testing.T) {
	e, _ := trashTree(t)
	e.SetTrashDays(0)
	rmR(t, e, "/a", trashHour)
	if _, err := e.Resolve(credRoot, "/"+TrashName, false); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("trash with the trash off: %v", err)
	}
	if e.Statfs().UsedBytes != 0 {
		t.Fatalf("used %d with the trash off", e.Statfs().UsedBytes)
	}
}

func TestTrashKeptByCheckpoint(t *testing.T) {
	e, _ := trashTree(t)
	rmR(t, e, "/a", trashHour)
	var b1, b2 bytes.Buffer
	if err := e.WriteCheckpoint(&b1); err != nil {
		t.Fatal(err)
	}
	l, err := Load(bytes.NewReader(b1.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteCheckpoint(&b2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Fatal("checkpoint of the loaded engine differs")
	}
	l.SetTrashDays(1)
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if got := len(l.TrashList()); got != 5 {
		t.Fatalf("loaded trash holds %d entries, want 5", got)
	}
	if _, err := l.TrashRestoreHour(credRoot, "2026-12-02-10", trashHour); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Resolve(credRoot, "/a/b/f", false); err != nil {
		t.Fatal(err)
	}
}

func TestTrashExpireAfterEmptyTrash(t *testing.T) {
	e, _ := trashTree(t)
	// Nothing in the trash: the collector learns that nothing is due.
	if f, _, err := e.ExpireTrash(trashHour); err != nil || f != 0 {
		t.Fatalf("expire of an empty trash: %d %v", f, err)
	}
	rmR(t, e, "/a/s", trashHour+int64(2*time.Hour))
	// The new hour is due a day after it ends, not never.
	if f, _, err := e.ExpireTrash(trashHour + int64(26*time.Hour)); err != nil || f != 0 {
		t.Fatalf("expire before the hour is due: %d %v", f, err)
	}
	if f, _, err := e.ExpireTrash(trashHour + int64(27*time.Hour)); err != nil || f != 1 {
		t.Fatalf("expire when the hour is due: %d %v", f, err)
	}
}

// The collector frees the same on an engine that has run it before as on
// one just loaded, even after root changed the trash directory itself.
func TestTrashExpireSeesRootsOwnChanges(t *testing.T) {
	e, _ := trashTree(t)
	rmR(t, e, "/a/s", trashHour)
	if f, _, err := e.ExpireTrash(trashHour + int64(time.Hour)); err != nil || f != 0 {
		t.Fatalf("expire: %d %v", f, err)
	}
	// An hour directory made by hand, long expired.
	if _, err := pathMkdir(e, credRoot, "/"+TrashName+"/2026-11-01-00", 0o700, trashHour+int64(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	l, err := Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	l.SetTrashDays(1)
	now := trashHour + int64(2*time.Hour)
	f1, _, err1 := e.ExpireTrash(now)
	f2, _, err2 := l.ExpireTrash(now)
	if err1 != nil || err2 != nil || f1 != f2 || len(e.TrashList()) != 1 {
		t.Fatalf("expire: running engine %d %v, loaded %d %v; trash %+v", f1, err1, f2, err2, e.TrashList())
	}
	if _, err := e.Resolve(credRoot, "/"+TrashName+"/2026-11-01-00", false); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("the expired hour made by hand: %v", err)
	}
}

func TestTrashRmdirOfTheTrashFrees(t *testing.T) {
	e, _ := trashTree(t)
	rmR(t, e, "/a/s", trashHour)
	if _, _, err := e.TrashPurge(credRoot, math.MaxInt64, trashHour); err != nil {
		t.Fatal(err)
	}
	if err := pathRmdir(e, credRoot, "/"+TrashName, trashHour); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resolve(credRoot, "/"+TrashName, false); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("the trash after its rmdir: %v", err)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	// The next removal makes it again.
	rmR(t, e, "/a/b/f", trashHour)
	if len(e.TrashList()) != 1 {
		t.Fatalf("trash: %+v", e.TrashList())
	}
}
