package engine

import (
	"bytes"
	"os"
	"testing"
)

// movedPair moves moveTree's directory from a partition 1 engine to a
// partition 2 engine through the protocol's steps and returns both, with
// the old numbers of the top, its first subdirectory and a file below.
func movedPair(t testing.TB) (src, dst *Engine, top, sub, file Ino) {
	t.Helper()
	src, dst = New(1, 1), New(2, 1)
	top = moveTree(t, src)
	sub = mustLookupIn(t, src, top, "sub0")
	file = mustLookupIn(t, src, mustLookupIn(t, src, sub, "deep"), "f0")
	dd, _ := dst.Mkdir(credRoot, dst.Root(), "into", 0o777, 2)
	xmove(t, XID{3}, src, src.Root(), "top", dst, dd.Ino, "moved")
	return src, dst, top, sub, file
}

// xmove renames entry name of directory from in engine src to entry
// newName of directory to in engine dst, through the protocol's steps.
func xmove(t testing.TB, xid XID, src *Engine, from Ino, name string, dst *Engine, to Ino, newName string) {
	t.Helper()
	p, err := src.XPrepareSource(credRoot, xid, from, name, 0, dst.Partition(), nil, 8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.XPrepareTarget(credRoot, xid, to, newName, 0, src.Partition(), p.Dir, p.Size, nil, 8); err != nil {
		t.Fatal(err)
	}
	img, err := src.XCommitSource(xid, nil, nil, 9)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.XCommitTarget(xid, img, 10); err != nil {
		t.Fatal(err)
	}
	if err := src.XForget(xid, 11); err != nil {
		t.Fatal(err)
	}
}

// TestForwardsOfAMovedTree: after a directory moved between partitions,
// the source forwards every old number of the tree to the target, and the
// target maps each to the node it became; both survive a checkpoint and
// load, and numbers no node ever had are left alone.
func TestForwardsOfAMovedTree(t *testing.T) {
	src, dst, top, sub, file := movedPair(t)
	into := mustLookup(t, dst, "into")
	newTop := mustLookupIn(t, dst, into, "moved")
	newSub := mustLookupIn(t, dst, newTop, "sub0")
	newFile := mustLookupIn(t, dst, mustLookupIn(t, dst, newSub, "deep"), "f0")
	for range 2 {
		if src.Forwards() != 21 || dst.Forwards() != 21 {
			t.Fatalf("%d forwards at the source, %d at the target; want 21 each", src.Forwards(), dst.Forwards())
		}
		for old, now := range map[Ino]Ino{top: newTop, sub: newSub, file: newFile} {
			if to, as, moved := src.Forwarded(old); !moved || to != 2 || as != old {
				t.Fatalf("source: %d forwarded to %d as %d, moved %v", old, to, as, moved)
			}
			if to, as, moved := dst.Forwarded(old); moved || to != 2 || as != now {
				t.Fatalf("target: %d resolved to %d (partition %d), moved %v; want %d", old, as, to, moved, now)
			}
		}
		for _, ino := range []Ino{src.Root(), MakeIno(1, 999), MakeIno(7, 3)} {
			if _, as, moved := src.Forwarded(ino); moved || as != ino {
				t.Fatalf("%d: %d, moved %v", ino, as, moved)
			}
		}
		src, dst = reloadEngine(t, src), reloadEngine(t, dst)
	}
	// The file moves on to a third partition: the target's alias of its
	// first number leads to its tombstone, and the third maps its second.
	third := New(5, 1)
	xmove(t, XID{4}, dst, mustLookupIn(t, dst, newSub, "deep"), "f0", third, third.Root(), "f0")
	if to, as, moved := dst.Forwarded(file); !moved || to != 5 || as != newFile {
		t.Fatalf("target after the file left: %d forwarded to %d as %d, moved %v", file, to, as, moved)
	}
	if _, as, moved := third.Forwarded(newFile); moved || as != mustLookup(t, third, "f0") {
		t.Fatalf("third partition: %d resolved to %d, moved %v", newFile, as, moved)
	}
	for _, e := range []*Engine{src, dst, third} {
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForwardsUnderFreeze: a freeze's checkpoint holds the forwards as
// they were at the freeze, whatever the engine records after it.
func TestForwardsUnderFreeze(t *testing.T) {
	_, dst, _, _, _ := movedPair(t)
	var before bytes.Buffer
	if err := dst.WriteCheckpoint(&before); err != nil {
		t.Fatal(err)
	}
	fr := dst.Freeze()
	dst.tombstone(MakeIno(2, 12345), 3)
	dst.alias(MakeIno(4, 7), dst.Root())
	dst.alias(MakeIno(2, 99), dst.Root()) // one of its own numbers: ignored
	var frozen bytes.Buffer
	if err := fr.WriteCheckpoint(&frozen); err != nil {
		t.Fatal(err)
	}
	fr.Release()
	if !bytes.Equal(before.Bytes(), frozen.Bytes()) {
		t.Fatal("the frozen checkpoint holds forwards made after the freeze")
	}
	if got := reloadEngine(t, dst).Forwards(); got != 23 {
		t.Fatalf("%d forwards after the reload, want 23", got)
	}
}

// TestForwardsBounded: past MaxForwards the oldest forwards go, and the
// newest stay.
func TestForwardsBounded(t *testing.T) {
	e := New(5, 1)
	for i := range uint64(MaxForwards + 3) {
		e.tombstone(MakeIno(5, 100+i), 6)
	}
	if e.Forwards() != MaxForwards {
		t.Fatalf("%d forwards, want %d", e.Forwards(), MaxForwards)
	}
	if _, _, moved := e.Forwarded(MakeIno(5, 102)); moved {
		t.Fatal("the oldest forwards were kept")
	}
	if to, _, moved := e.Forwarded(MakeIno(5, 103)); !moved || to != 6 {
		t.Fatal("a forward within the bound was dropped")
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

// forwardsSeed is a checkpoint of each side of a directory's move, with
// their forwards.
func forwardsSeed(tb testing.TB) [][]byte {
	src, dst, _, _, _ := movedPair(tb)
	var out [][]byte
	for _, e := range []*Engine{src, dst} {
		var buf bytes.Buffer
		if err := e.WriteCheckpoint(&buf); err != nil {
			tb.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	return out
}

// TestForwardsAfterSourceRestart: the image a committed source intent
// keeps carries the moved nodes' numbers through a checkpoint and load of
// the source, so a delivery after the source restarted still leaves the
// target its aliases.
func TestForwardsAfterSourceRestart(t *testing.T) {
	src, dst := New(1, 1), New(2, 1)
	top := moveTree(t, src)
	xid := XID{8}
	p, err := src.XPrepareSource(credRoot, xid, src.Root(), "top", 0, 2, nil, 8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.XPrepareTarget(credRoot, xid, dst.Root(), "moved", 0, 1, true, p.Size, nil, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := src.XCommitSource(xid, nil, nil, 9); err != nil {
		t.Fatal(err)
	}
	src = reloadEngine(t, src)
	img, err := src.XCommitSource(xid, nil, nil, 10) // the image as the checkpoint kept it
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.XCommitTarget(xid, img, 11); err != nil {
		t.Fatal(err)
	}
	if _, as, moved := dst.Forwarded(top); moved || as != mustLookup(t, dst, "moved") {
		t.Fatalf("target after a delivery from a restarted source: %d resolves to %d, moved %v", top, as, moved)
	}
	if dst.Forwards() != 21 {
		t.Fatalf("%d forwards at the target, want 21", dst.Forwards())
	}
}

// TestIntentsOfVersionOne loads a checkpoint written before images
// carried their inode numbers (CNPYXI01, testdata/intents-v1.ckpt, the
// intents seed of that version): its intents and their images load, with
// no numbers, and the checkpoint written again is of the current version.
func TestIntentsOfVersionOne(t *testing.T) {
	data, err := os.ReadFile("testdata/intents-v1.ckpt")
	if err != nil {
		t.Fatal(err)
	}
	e, err := loadBoth(t, data)
	if err != nil {
		t.Fatal(err)
	}
	images := 0
	for _, in := range e.Intents() {
		if in.Image != nil {
			images++
			in.Image.walk(func(img *XNode) {
				if img.Attr.Ino != 0 {
					t.Fatalf("an image of version 1 with inode number %d", img.Attr.Ino)
				}
			})
		}
	}
	if len(e.Intents()) < 2 || images == 0 {
		t.Fatalf("%d intents, %d with images", len(e.Intents()), images)
	}
	var again bytes.Buffer
	if err := e.WriteCheckpoint(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(again.Bytes(), []byte(xintentsMagic)) || bytes.Contains(again.Bytes(), []byte(xintentsMagic01)) {
		t.Fatal("the checkpoint written again is not of the current version")
	}
}
