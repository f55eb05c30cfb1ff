package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// treeListing lists the subtree of directory ino of e, one line a node:
// path, mode, owner, size, links, mtime, xattrs and the slices of a file,
// but not inode numbers (a moved node gets one of its new partition).
func treeListing(t *testing.T, e *Engine, ino Ino) []string {
	t.Helper()
	var out []string
	var walk func(dir Ino, at string)
	walk = func(dir Ino, at string) {
		ents, _, _, err := e.Readdir(credRoot, dir, "", 1<<20, true)
		if err != nil {
			t.Fatalf("readdir %s: %v", at, err)
		}
		for _, d := range ents {
			a := d.Attr
			line := fmt.Sprintf("%s/%s %o %d:%d size %d links %d mtime %d", at, d.Name, a.Mode, a.UID, a.GID, a.Size, a.Nlink, a.Mtime)
			names, err := e.ListXattr(credRoot, a.Ino)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range names {
				v, _ := e.GetXattr(credRoot, a.Ino, x)
				line += fmt.Sprintf(" %s=%q", x, v)
			}
			if a.Mode&S_IFMT == S_IFREG {
				_, views, err := e.ReadChunks(a.Ino, 0, 4)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range views {
					for _, s := range v.Slices {
						line += fmt.Sprintf(" slice %d", s.ID)
					}
				}
			}
			out = append(out, line)
			if a.Mode&S_IFMT == S_IFDIR {
				walk(a.Ino, at+"/"+d.Name)
			}
		}
	}
	walk(ino, "")
	slices.Sort(out)
	return out
}

// moveTree makes /top in src: two levels of directories, files with
// slices, a symlink, xattrs and a fifo.
func moveTree(t testing.TB, src *Engine) Ino {
	t.Helper()
	top, err := src.Mkdir(credRoot, src.Root(), "top", 0o777, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		sub, err := src.Mkdir(credU1, top.Ino, fmt.Sprintf("sub%d", i), 0o750, 3)
		if err != nil {
			t.Fatal(err)
		}
		deep, _ := src.Mkdir(credU1, sub.Ino, "deep", 0o700, 3)
		for j := range 4 {
			f, err := src.Mknod(credU1, deep.Ino, fmt.Sprintf("f%d", j), S_IFREG|0o640, 0, 4)
			if err != nil {
				t.Fatal(err)
			}
			id := allocOne(t, src)
			if _, err := src.Commit(credU1, f.Ino, []SliceWrite{{Chunk: 0, Slice: Slice{ID: id, Size: 100, Len: 100}}}, 100, 5, 5); err != nil {
				t.Fatal(err)
			}
		}
		if err := src.SetXattr(credU1, sub.Ino, "user.sub", []byte{byte('a' + i)}, 0, 6); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.Symlink(credU1, top.Ino, "link", "sub0/deep/f0", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Mknod(credU1, top.Ino, "fifo", S_IFIFO|0o600, 0, 7); err != nil {
		t.Fatal(err)
	}
	return top.Ino
}

// TestDirectoryMovesAcrossEngines: a directory with its subtree (21
// nodes) moves between two partitions through the protocol's steps, with
// a checkpoint and reload after each: the target holds the same tree
// (names, modes, owners, sizes, links, times, xattrs, slices), the source
// holds none of it and collects none of its slices, the parents' link
// counts follow, and both pass the invariant check.
func TestDirectoryMovesAcrossEngines(t *testing.T) {
	src, dst := New(1, 1), New(2, 1)
	top := moveTree(t, src)
	want := treeListing(t, src, top)
	srcRootLinks := mustAttr(t, src, src.Root()).Nlink
	dd, _ := dst.Mkdir(credRoot, dst.Root(), "into", 0o777, 2)

	xid := XID{7}
	p, err := src.XPrepareSource(credRoot, xid, src.Root(), "top", 0, 2, nil, 8)
	if err != nil || !p.Dir || p.Size.Nodes != 21 || p.Ino != top {
		t.Fatalf("prepare: %+v %v", p, err)
	}
	src = reloadEngine(t, src)
	if _, err := dst.XPrepareTarget(credU1, xid, dd.Ino, "moved", 0, 1, true, p.Size, nil, 8); err != nil {
		t.Fatal(err)
	}
	dst = reloadEngine(t, dst)
	img, err := src.XCommitSource(xid, nil, nil, 9)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(img.AllChunks()); n != 12 {
		t.Fatalf("image with %d chunks, want 12", n)
	}
	src = reloadEngine(t, src) // the committed intent's tree image goes through the checkpoint
	if again, err := src.XCommitSource(xid, nil, nil, 10); err != nil || len(again.Entries) != 5 {
		t.Fatalf("second commit: %d entries, %v", len(again.Entries), err)
	}
	if _, err := src.Lookup(credRoot, src.Root(), "top"); err != syscall.ENOENT {
		t.Fatalf("source entry after the decision: %v", err)
	}
	if got := mustAttr(t, src, src.Root()).Nlink; got != srcRootLinks-1 {
		t.Fatalf("source root has %d links, want %d", got, srcRootLinks-1)
	}
	if src.GarbageLen() != 0 {
		t.Fatalf("the source collects %d slices of the tree that left", src.GarbageLen())
	}
	if err := dst.XCommitTarget(xid, img, 11); err != nil {
		t.Fatal(err)
	}
	if err := src.XForget(xid, 12); err != nil {
		t.Fatal(err)
	}
	src, dst = reloadEngine(t, src), reloadEngine(t, dst)
	moved := mustLookup(t, dst, "into")
	a, err := dst.Lookup(credRoot, moved, "moved")
	if err != nil || a.Ino.Partition() != 2 || a.Mode != S_IFDIR|0o777 || a.Nlink != 5 || a.UID != 0 {
		t.Fatalf("arrived directory: %+v %v", a, err)
	}
	if got := mustAttr(t, dst, moved).Nlink; got != 3 {
		t.Fatalf("target parent has %d links, want 3", got)
	}
	if got := treeListing(t, dst, a.Ino); !slices.Equal(got, want) {
		t.Fatalf("arrived tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range []*Engine{src, dst} {
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
	}
	// The target owns the slices now: removing a file there makes its
	// slice the target's garbage.
	sub, _ := dst.Lookup(credRoot, a.Ino, "sub1")
	deep, _ := dst.Lookup(credRoot, sub.Ino, "deep")
	if err := dst.Unlink(credRoot, deep.Ino, "f2", 13); err != nil {
		t.Fatal(err)
	}
	if dst.GarbageLen() != 1 {
		t.Fatalf("target garbage %d, want 1", dst.GarbageLen())
	}
}

func mustAttr(t *testing.T, e *Engine, ino Ino) Attr {
	t.Helper()
	a, err := e.GetAttr(ino)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestDirectoryReplacesEmptyDirectory: a directory arriving replaces an
// empty one, which nothing may fill between the prepare and the commit;
// a directory that is not empty, or a file, is refused as rename refuses
// it.
func TestDirectoryReplacesEmptyDirectory(t *testing.T) {
	src, dst := New(1, 1), New(2, 1)
	moveTree(t, src)
	p, err := src.XPrepareSource(credRoot, XID{1}, src.Root(), "top", 0, 2, nil, 8)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := dst.Mkdir(credRoot, dst.Root(), "full", 0o755, 2)
	if _, err := dst.Mknod(credRoot, full.Ino, "x", S_IFREG|0o644, 0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Mknod(credRoot, dst.Root(), "file", S_IFREG|0o644, 0, 2); err != nil {
		t.Fatal(err)
	}
	empty, _ := dst.Mkdir(credRoot, dst.Root(), "empty", 0o755, 2)
	for name, want := range map[string]error{"full": syscall.ENOTEMPTY, "file": syscall.ENOTDIR} {
		if _, err := dst.XPrepareTarget(credRoot, XID{1}, dst.Root(), name, 0, 1, true, p.Size, nil, 9); !errors.Is(err, want) {
			t.Fatalf("onto %s: %v, want %v", name, err, want)
		}
	}
	if _, err := dst.XPrepareTarget(credRoot, XID{1}, dst.Root(), "empty", 0, 1, true, p.Size, nil, 9); err != nil {
		t.Fatal(err)
	}
	dst = reloadEngine(t, dst) // the pin survives the checkpoint
	if _, err := dst.Mknod(credRoot, empty.Ino, "late", S_IFREG|0o644, 0, 10); err != syscall.EBUSY {
		t.Fatalf("create in the directory about to be replaced: %v, want EBUSY", err)
	}
	if err := dst.Rename(credRoot, full.Ino, "x", empty.Ino, "x", 0, 10); err != syscall.EBUSY {
		t.Fatalf("rename into the directory about to be replaced: %v, want EBUSY", err)
	}
	links := mustAttr(t, dst, dst.Root()).Nlink
	img, err := src.XCommitSource(XID{1}, nil, nil, 11)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.XCommitTarget(XID{1}, img, 12); err != nil {
		t.Fatal(err)
	}
	a, err := dst.Lookup(credRoot, dst.Root(), "empty")
	if err != nil || a.Ino == empty.Ino || a.Nlink != 5 {
		t.Fatalf("replaced: %+v %v", a, err)
	}
	if got := mustAttr(t, dst, dst.Root()).Nlink; got != links {
		t.Fatalf("target root has %d links after a directory replaced one, want %d", got, links)
	}
	if _, err := dst.GetAttr(empty.Ino); err != syscall.ENOENT {
		t.Fatalf("replaced directory: %v", err)
	}
	for _, e := range []*Engine{src, dst} {
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDirectoryThatCannotMove: a subtree moves only if everything in it
// could; what cannot is refused at the prepare, and again at the
// decision if it changed in between, leaving the source as it was.
func TestDirectoryThatCannotMove(t *testing.T) {
	e := New(1, 1)
	top := moveTree(t, e)
	sub := mustLookupIn(t, e, top, "sub0")
	deep := mustLookupIn(t, e, sub, "deep")
	f0 := mustLookupIn(t, e, deep, "f0")
	refused := func(what string, want syscall.Errno, busy ...Ino) {
		t.Helper()
		if _, err := e.XPrepareSource(credRoot, XID{9}, e.Root(), "top", 0, 2, busy, 20); !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		if len(e.Intents()) != 0 {
			t.Fatalf("%s: an intent was left", what)
		}
	}
	refused("a mount point below", syscall.EBUSY, deep)
	if _, err := e.Link(credRoot, f0, top, "second", 21); err != nil {
		t.Fatal(err)
	}
	refused("a file with two links", syscall.EXDEV)
	if err := e.Unlink(credRoot, top, "second", 22); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Open(credRoot, f0, 0); err != nil {
		t.Fatal(err)
	}
	refused("an open file", syscall.EBUSY)
	if err := e.Close(f0, 22); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetQuota(credRoot, sub, 100, 0); err != nil {
		t.Fatal(err)
	}
	refused("a directory quota's root", syscall.EXDEV)
	if err := e.RemoveQuota(credRoot, sub); err != nil {
		t.Fatal(err)
	}
	// A change between the prepare and the decision is checked again.
	if _, err := e.XPrepareSource(credRoot, XID{9}, e.Root(), "top", 0, 2, nil, 23); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Open(credRoot, f0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.XCommitSource(XID{9}, nil, nil, 24); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("decision with a file opened since the prepare: %v", err)
	}
	if _, err := e.Lookup(credRoot, e.Root(), "top"); err != nil {
		t.Fatalf("the tree after a refused decision: %v", err)
	}
	if err := e.XAbort(XID{9}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(f0, 22); err != nil {
		t.Fatal(err)
	}
	// Too many nodes.
	for i := range MaxMoveNodes {
		if _, err := e.Mknod(credRoot, deep, fmt.Sprintf("n%d", i), S_IFREG|0o644, 0, 25); err != nil {
			t.Fatal(err)
		}
	}
	refused("a subtree past the limit", syscall.EXDEV)
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func mustLookupIn(t testing.TB, e *Engine, dir Ino, name string) Ino {
	t.Helper()
	a, err := e.Lookup(credRoot, dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return a.Ino
}

// TestDirectoryExchangeAcrossEngines: RENAME_EXCHANGE across partitions
// with directories, a tree for a directory holding a file, then for a
// file: each side ends with the other's tree; the target's subtree,
// whose image went to the source at its prepare, is pinned until the
// commit (nothing made, removed or renamed in it), across a checkpoint.
func TestDirectoryExchangeAcrossEngines(t *testing.T) {
	src, dst := New(1, 1), New(2, 1)
	top := moveTree(t, src)
	wantTop := treeListing(t, src, top)
	other, _ := dst.Mkdir(credRoot, dst.Root(), "other", 0o755, 2)
	inner, _ := dst.Mkdir(credRoot, other.Ino, "inner", 0o755, 2)
	if _, err := dst.Mknod(credRoot, inner.Ino, "kept", S_IFREG|0o600, 0, 2); err != nil {
		t.Fatal(err)
	}
	wantOther := treeListing(t, dst, other.Ino)
	srcLinks, dstLinks := mustAttr(t, src, src.Root()).Nlink, mustAttr(t, dst, dst.Root()).Nlink

	xid := XID{3}
	p, err := src.XPrepareSource(credRoot, xid, src.Root(), "top", RenameExchange, 2, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	imgOther, err := dst.XPrepareTarget(credRoot, xid, dst.Root(), "other", RenameExchange, 1, p.Dir, p.Size, nil, 10)
	if err != nil || imgOther == nil || len(imgOther.Entries) != 1 {
		t.Fatalf("target's prepare: %+v %v", imgOther, err)
	}
	dst = reloadEngine(t, dst)
	for what, err := range map[string]error{
		"create below": func() error { _, err := dst.Mknod(credRoot, inner.Ino, "new", S_IFREG|0o644, 0, 11); return err }(),
		"unlink below": dst.Unlink(credRoot, inner.Ino, "kept", 11),
		"rename out":   dst.Rename(credRoot, inner.Ino, "kept", dst.Root(), "out", 0, 11),
		"chmod below": func() error {
			_, err := dst.SetAttr(credRoot, inner.Ino, SetAttr{Valid: SetMode, Mode: 0o700}, 11)
			return err
		}(),
		"mkdir at top":  func() error { _, err := dst.Mkdir(credRoot, other.Ino, "x", 0o755, 11); return err }(),
		"rmdir the top": dst.Rmdir(credRoot, dst.Root(), "other", 11),
	} {
		if !errors.Is(err, syscall.EBUSY) {
			t.Errorf("%s of the pinned tree: %v, want EBUSY", what, err)
		}
	}
	imgTop, err := src.XCommitSource(xid, imgOther, nil, 12)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.XCommitTarget(xid, imgTop, 13); err != nil {
		t.Fatal(err)
	}
	if err := src.XForget(xid, 14); err != nil {
		t.Fatal(err)
	}
	src, dst = reloadEngine(t, src), reloadEngine(t, dst)
	if got := treeListing(t, src, mustLookup(t, src, "top")); !slices.Equal(got, wantOther) {
		t.Fatalf("source's top after the exchange:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantOther, "\n"))
	}
	if got := treeListing(t, dst, mustLookup(t, dst, "other")); !slices.Equal(got, wantTop) {
		t.Fatalf("target's other after the exchange:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantTop, "\n"))
	}
	if a, b := mustAttr(t, src, src.Root()).Nlink, mustAttr(t, dst, dst.Root()).Nlink; a != srcLinks || b != dstLinks {
		t.Fatalf("roots' links %d and %d after a directory for a directory, want %d and %d", a, b, srcLinks, dstLinks)
	}
	// A directory for a file: the link counts follow.
	if _, err := dst.Mknod(credRoot, dst.Root(), "file", S_IFREG|0o644, 0, 15); err != nil {
		t.Fatal(err)
	}
	xid = XID{4}
	if p, err = src.XPrepareSource(credRoot, xid, src.Root(), "top", RenameExchange, 2, nil, 16); err != nil {
		t.Fatal(err)
	}
	imgFile, err := dst.XPrepareTarget(credRoot, xid, dst.Root(), "file", RenameExchange, 1, p.Dir, p.Size, nil, 16)
	if err != nil {
		t.Fatal(err)
	}
	if imgTop, err = src.XCommitSource(xid, imgFile, nil, 17); err != nil {
		t.Fatal(err)
	}
	if err := dst.XCommitTarget(xid, imgTop, 18); err != nil {
		t.Fatal(err)
	}
	if a, err := src.Lookup(credRoot, src.Root(), "top"); err != nil || a.Mode&S_IFMT != S_IFREG {
		t.Fatalf("source's top: %+v %v, want the file", a, err)
	}
	if a, b := mustAttr(t, src, src.Root()).Nlink, mustAttr(t, dst, dst.Root()).Nlink; a != srcLinks-1 || b != dstLinks+1 {
		t.Fatalf("roots' links %d and %d after a directory for a file, want %d and %d", a, b, srcLinks-1, dstLinks+1)
	}
	for _, e := range []*Engine{src, dst} {
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPackedDirectoryMoves: directories the idle sweep packed (with their
// children's nodes) move like any other, at both ends of an exchange,
// and both engines pass the invariant check, also after a reload.
func TestPackedDirectoryMoves(t *testing.T) {
	src, dst := New(1, 1), New(2, 1)
	top := moveTree(t, src)
	want := treeListing(t, src, top)
	other, _ := dst.Mkdir(credRoot, dst.Root(), "other", 0o755, 2)
	if _, err := dst.Mknod(credRoot, other.Ino, "kept", S_IFREG|0o600, 0, 2); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Engine{src, dst} {
		for e.CompactIdle(1<<20) > 0 {
		}
		if e.PackedDirs() == 0 {
			t.Fatal("nothing packed")
		}
	}
	p, err := src.XPrepareSource(credRoot, XID{5}, src.Root(), "top", RenameExchange, 2, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Engine{src, dst} { // packed again after the prepare's walk
		for e.CompactIdle(1<<20) > 0 {
		}
	}
	imgOther, err := dst.XPrepareTarget(credRoot, XID{5}, dst.Root(), "other", RenameExchange, 1, p.Dir, p.Size, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Engine{src, dst} {
		for e.CompactIdle(1<<20) > 0 {
		}
	}
	imgTop, err := src.XCommitSource(XID{5}, imgOther, nil, 11)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.XCommitTarget(XID{5}, imgTop, 12); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Engine{src, dst} {
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
	}
	src, dst = reloadEngine(t, src), reloadEngine(t, dst)
	if got := treeListing(t, dst, mustLookup(t, dst, "other")); !slices.Equal(got, want) {
		t.Fatalf("moved packed tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := src.Lookup(credRoot, mustLookup(t, src, "top"), "kept"); err != nil {
		t.Fatalf("the packed directory that went the other way: %v", err)
	}
}

// TestDirectoryMoveUnderFreeze: a frozen view taken before a directory
// leaves (and one before it arrives) writes, after the move, the very
// checkpoint it would have written before it: the move changes only the
// live engine.
func TestDirectoryMoveUnderFreeze(t *testing.T) {
	src, dst := New(1, 1), New(2, 1)
	moveTree(t, src)
	p, err := src.XPrepareSource(credRoot, XID{6}, src.Root(), "top", 0, 2, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.XPrepareTarget(credRoot, XID{6}, dst.Root(), "top", 0, 1, p.Dir, p.Size, nil, 10); err != nil {
		t.Fatal(err)
	}
	var before [2]bytes.Buffer
	frozen := [2]*Frozen{src.Freeze(), dst.Freeze()}
	for i, f := range frozen {
		if err := f.WriteCheckpoint(&before[i]); err != nil {
			t.Fatal(err)
		}
	}
	img, err := src.XCommitSource(XID{6}, nil, nil, 11)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.XCommitTarget(XID{6}, img, 12); err != nil {
		t.Fatal(err)
	}
	for i, f := range frozen {
		var after bytes.Buffer
		if err := f.WriteCheckpoint(&after); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(after.Bytes(), before[i].Bytes()) {
			t.Fatalf("engine %d: the frozen view changed with the move", i)
		}
		f.Release()
	}
	for _, e := range []*Engine{src, dst} {
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
	}
}
