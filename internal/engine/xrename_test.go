package engine

import (
	"bytes"
	"syscall"
	"testing"
)

// reloadEngine writes e's checkpoint and loads it back (Load runs Check).
func reloadEngine(t *testing.T, e *Engine) *Engine {
	t.Helper()
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Load(&buf)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(got.Intents()) != len(e.Intents()) {
		t.Fatalf("%d intents after the reload, %d before", len(got.Intents()), len(e.Intents()))
	}
	return got
}

func TestRenameAcrossEnginesWithCheckpoints(t *testing.T) {
	src := New(1, 1)
	dst := New(2, 1)
	sd, _ := src.Mkdir(credRoot, src.Root(), "d", 0o777, 2)
	dd, _ := dst.Mkdir(credRoot, dst.Root(), "d", 0o777, 2)
	f, _ := src.Mknod(credU1, sd.Ino, "f", S_IFREG|0o640, 0, 3)
	id := allocOne(t, src)
	if _, err := src.Commit(credU1, f.Ino, []SliceWrite{{Chunk: 0, Slice: Slice{ID: id, Size: 100, Len: 100}}}, 100, 4, 4); err != nil {
		t.Fatal(err)
	}
	if err := src.SetXattr(credU1, f.Ino, "user.a", []byte("b"), 0, 4); err != nil {
		t.Fatal(err)
	}
	xid := XID{1, 2, 3}
	if _, err := src.XPrepareSource(credU1, xid, sd.Ino, "f", 0, 2, nil, 5); err != nil {
		t.Fatal(err)
	}
	src = reloadEngine(t, src)
	if _, err := dst.XPrepareTarget(credU1, xid, dd.Ino, "g", 0, 1, false, XSize{}, nil, 5); err != nil {
		t.Fatal(err)
	}
	dst = reloadEngine(t, dst)
	// The reservation survives the checkpoint.
	if _, err := dst.Mknod(credRoot, dd.Ino, "g", S_IFREG|0o644, 0, 6); err != syscall.EBUSY {
		t.Fatalf("create at a reserved name: %v, want EBUSY", err)
	}
	img, err := src.XCommitSource(xid, nil, nil, 7)
	if err != nil {
		t.Fatal(err)
	}
	src = reloadEngine(t, src)
	if got := src.IntentState(xid); got != XCommitted {
		t.Fatalf("source intent after reload: state %d", got)
	}
	if again, err := src.XCommitSource(xid, nil, nil, 8); err != nil || len(again.Chunks) != 1 {
		t.Fatalf("second commit: %v %v", again, err)
	}
	if err := src.XAbort(xid); err == nil {
		t.Fatal("a committed intent was aborted")
	}
	if _, err := src.Lookup(credRoot, sd.Ino, "f"); err != syscall.ENOENT {
		t.Fatalf("source entry after commit: %v", err)
	}
	if src.GarbageLen() != 0 {
		t.Fatalf("the source collects %d slices of the node that left", src.GarbageLen())
	}
	if err := dst.XCommitTarget(xid, img, 9); err != nil {
		t.Fatal(err)
	}
	if err := dst.XCommitTarget(xid, img, 10); err != nil {
		t.Fatalf("second target commit: %v", err)
	}
	if err := src.XForget(xid, 12); err != nil {
		t.Fatal(err)
	}
	dst = reloadEngine(t, dst)
	src = reloadEngine(t, src)
	a, err := dst.Lookup(credRoot, dd.Ino, "g")
	if err != nil || a.Ino.Partition() != 2 || a.Size != 100 || a.Mode != S_IFREG|0o640 || a.UID != credU1.UID {
		t.Fatalf("arrived node: %+v %v", a, err)
	}
	if v, err := dst.GetXattr(credRoot, a.Ino, "user.a"); err != nil || string(v) != "b" {
		t.Fatalf("arrived xattr: %q %v", v, err)
	}
	_, views, err := dst.ReadChunks(a.Ino, 0, 1)
	if err != nil || len(views) != 1 || views[0].Slices[0].ID != id {
		t.Fatalf("arrived content: %+v %v", views, err)
	}
	// Deleting it there makes the slice the target's garbage.
	if err := dst.Unlink(credRoot, dd.Ino, "g", 11); err != nil {
		t.Fatal(err)
	}
	if dst.GarbageLen() != 1 {
		t.Fatalf("target garbage %d, want 1", dst.GarbageLen())
	}
	reloadEngine(t, dst)
	if len(dst.Intents()) != 0 || src.IntentState(xid) != XDone {
		t.Fatalf("intents left: target %d, source in state %d", len(dst.Intents()), src.IntentState(xid))
	}
	// A retry of the rename finds it done at the source.
	if p, err := src.XPrepareSource(credU1, xid, sd.Ino, "f", 0, 2, nil, 13); err != nil || p.State != XDone {
		t.Fatalf("retried prepare: state %d, %v", p.State, err)
	}
}

func TestExchangeAcrossEnginesPinsTheTarget(t *testing.T) {
	src, dst := New(1, 1), New(2, 1)
	a, _ := src.Mknod(credRoot, src.Root(), "a", S_IFREG|0o644, 0, 2)
	b, _ := dst.Symlink(credRoot, dst.Root(), "b", "/target", 2)
	xid := XID{9}
	if _, err := src.XPrepareSource(credRoot, xid, src.Root(), "a", RenameExchange, 2, nil, 3); err != nil {
		t.Fatal(err)
	}
	imgB, err := dst.XPrepareTarget(credRoot, xid, dst.Root(), "b", RenameExchange, 1, false, XSize{}, nil, 3)
	if err != nil || imgB == nil || imgB.Target != "/target" {
		t.Fatalf("prepare target: %+v %v", imgB, err)
	}
	for what, err := range map[string]error{
		"setattr": func() error { _, err := dst.SetAttr(credRoot, b.Ino, SetAttr{Valid: SetUID, UID: 5}, 4); return err }(),
		"unlink":  dst.Unlink(credRoot, dst.Root(), "b", 4),
		"xattr":   dst.SetXattr(credRoot, b.Ino, "user.x", nil, 0, 4),
	} {
		if err != syscall.EBUSY {
			t.Errorf("%s of a pinned node: %v, want EBUSY", what, err)
		}
	}
	dst = reloadEngine(t, dst)
	imgA, err := src.XCommitSource(xid, imgB, nil, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.XCommitTarget(xid, imgA, 6); err != nil {
		t.Fatal(err)
	}
	if err := src.XForget(xid, 12); err != nil {
		t.Fatal(err)
	}
	if tgt, err := src.Readlink(mustLookup(t, src, "a")); err != nil || tgt != "/target" {
		t.Fatalf("the symlink at the source: %q %v", tgt, err)
	}
	if got, _ := dst.Lookup(credRoot, dst.Root(), "b"); got.Mode&S_IFMT != S_IFREG {
		t.Fatalf("the file at the target: %+v", got)
	}
	_ = a
	for _, e := range []*Engine{src, dst} {
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

func mustLookup(t *testing.T, e *Engine, name string) Ino {
	t.Helper()
	return mustLookupIn(t, e, e.Root(), name)
}

func TestPrepareRefusesWhatCannotMove(t *testing.T) {
	e := New(1, 1)
	d, _ := e.Mkdir(credRoot, e.Root(), "d", 0o755, 2)
	f, _ := e.Mknod(credRoot, e.Root(), "f", S_IFREG|0o644, 0, 2)
	if _, err := e.Link(credRoot, f.Ino, e.Root(), "f2", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.XPrepareSource(credRoot, XID{1}, e.Root(), "f", 0, 2, nil, 4); err == nil {
		t.Fatal("a file with two links moved")
	}
	if _, err := e.XPrepareSource(credU1, XID{3}, d.Ino, "none", 0, 2, nil, 4); err != syscall.ENOENT {
		t.Fatalf("missing source: %v", err)
	}
	if _, err := e.XPrepareTarget(credU1, XID{4}, d.Ino, "x", 0, 2, false, XSize{}, nil, 4); err != syscall.EACCES {
		t.Fatalf("target without write permission: %v", err)
	}
	if _, err := e.XPrepareTarget(credRoot, XID{5}, e.Root(), "d", 0, 2, false, XSize{}, nil, 4); err != syscall.EISDIR {
		t.Fatalf("file onto a directory: %v", err)
	}
	if len(e.Intents()) != 0 {
		t.Fatal("a refused prepare left an intent")
	}
}

// TestMovingSliceStaysListed: a file's slice is listed by some partition
// at every step of a rename across partitions (the collector's orphan
// sweep asks them all before it deletes an object): by the source until
// its decision, by the source's committed intent until the target has
// the node, and by the target from then on.
func TestMovingSliceStaysListed(t *testing.T) {
	src, dst := New(1, 1), New(2, 1)
	f, _ := src.Mknod(credRoot, src.Root(), "f", S_IFREG|0o644, 0, 2)
	id := allocOne(t, src)
	if _, err := src.Commit(credRoot, f.Ino, []SliceWrite{{Chunk: 0, Slice: Slice{ID: id, Size: 10, Len: 10}}}, 10, 3, 3); err != nil {
		t.Fatal(err)
	}
	lists := func(e *Engine) bool {
		refs, _ := e.ListSlices(0, 0)
		for _, r := range refs {
			if r.ID == id {
				return true
			}
		}
		return false
	}
	step := func(what string, inSrc, inDst bool) {
		t.Helper()
		if lists(src) != inSrc || lists(dst) != inDst {
			t.Fatalf("%s: listed by the source %v (want %v), by the target %v (want %v)", what, lists(src), inSrc, lists(dst), inDst)
		}
	}
	step("before", true, false)
	xid := XID{9}
	if _, err := src.XPrepareSource(credRoot, xid, src.Root(), "f", 0, 2, nil, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.XPrepareTarget(credRoot, xid, dst.Root(), "g", 0, 1, false, XSize{}, nil, 4); err != nil {
		t.Fatal(err)
	}
	img, err := src.XCommitSource(xid, nil, nil, 5)
	if err != nil {
		t.Fatal(err)
	}
	step("decided, not arrived", true, false)
	src = reloadEngine(t, src)
	step("decided, after a checkpoint", true, false)
	if err := dst.XCommitTarget(xid, img, 6); err != nil {
		t.Fatal(err)
	}
	step("arrived", true, true)
	if err := src.XForget(xid, 7); err != nil {
		t.Fatal(err)
	}
	step("forgotten at the source", false, true)
}
