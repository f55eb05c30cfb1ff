package engine

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// commitInline writes data as the whole content of a new file name
// under the root, inline, and returns the file and the slice id.
func commitInline(t testing.TB, e *Engine, name string, data []byte, now int64) (Ino, uint64) {
	t.Helper()
	f, err := e.Mknod(credRoot, e.Root(), name, S_IFREG|0o644, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	id := allocOne(t, e)
	n := uint32(len(data))
	if _, err := e.Commit(credRoot, f.Ino, []SliceWrite{{Slice: Slice{ID: id, Size: n, Len: n}, Data: data}}, uint64(n), 0, now); err != nil {
		t.Fatalf("inline commit of %s: %v", name, err)
	}
	return f.Ino, id
}

// inlineOfFile returns the bytes the views of ino's first chunk name inline.
func inlineOfFile(t *testing.T, e *Engine, ino Ino) []byte {
	t.Helper()
	_, views, err := e.ReadChunks(ino, 0, 1)
	if err != nil || len(views) != 1 || len(views[0].Slices) != 1 {
		t.Fatalf("views of %d: %+v %v", ino, views, err)
	}
	d, _ := e.Inline(views[0].Slices[0].ID)
	return d
}

func TestInlineCommitReadListStore(t *testing.T) {
	e := New(1, 1)
	want := []byte("hello, inline")
	ino, id := commitInline(t, e, "f", want, 2)
	if got := inlineOfFile(t, e, ino); !bytes.Equal(got, want) {
		t.Fatalf("inline bytes %q, want %q", got, want)
	}
	if b, n := e.InlineBytes(); b != len(want) || n != 1 {
		t.Fatalf("InlineBytes %d %d", b, n)
	}
	e = reloadEngine(t, e)
	if got := inlineOfFile(t, e, ino); !bytes.Equal(got, want) {
		t.Fatalf("after a checkpoint: %q", got)
	}
	list, eof := e.ListInline(0, 0)
	if len(list) != 1 || !eof || list[0].ID != id || !bytes.Equal(list[0].Data, want) {
		t.Fatalf("ListInline: %+v %v", list, eof)
	}
	if list, eof := e.ListInline(id, 0); len(list) != 0 || !eof {
		t.Fatalf("ListInline after the last: %+v %v", list, eof)
	}
	e.InlineStored([]uint64{id, id + 999}) // an id never inline is passed over
	if _, ok := e.Inline(id); ok {
		t.Fatal("bytes kept after InlineStored")
	}
	_, views, _ := e.ReadChunks(ino, 0, 1)
	if views[0].Slices[0].ID != id || views[0].Slices[0].Len != uint32(len(want)) {
		t.Fatalf("the slice after it was stored: %+v", views[0].Slices)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if b, n := e.InlineBytes(); b != 0 || n != 0 {
		t.Fatalf("InlineBytes after storing: %d %d", b, n)
	}
}

func TestInlineRefusals(t *testing.T) {
	e := New(1, 1)
	f, _ := e.Mknod(credRoot, e.Root(), "f", S_IFREG|0o644, 0, 2)
	big, _ := e.Mknod(credRoot, e.Root(), "big", S_IFREG|0o644, 0, 2)
	if _, err := e.SetAttr(credRoot, big.Ino, SetAttr{Valid: SetSize, Size: 100}, 3); err != nil {
		t.Fatal(err)
	}
	data := []byte("0123456789")
	for _, tc := range []struct {
		name   string
		ino    Ino
		writes func(id uint64) []SliceWrite
		size   uint64
	}{
		{"not at pos 0", f.Ino, func(id uint64) []SliceWrite {
			return []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10, Pos: 5}, Data: data}}
		}, 0},
		{"not in chunk 0", f.Ino, func(id uint64) []SliceWrite {
			return []SliceWrite{{Chunk: 1, Slice: Slice{ID: id, Size: 10, Len: 10}, Data: data}}
		}, 0},
		{"len is not the bytes", f.Ino, func(id uint64) []SliceWrite {
			return []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 9}, Data: data}}
		}, 0},
		{"two writes", f.Ino, func(id uint64) []SliceWrite {
			return []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}, Data: data},
				{Chunk: 1, Slice: Slice{ID: id, Size: 10, Len: 10}}}
		}, 0},
		{"a second write inline", f.Ino, func(id uint64) []SliceWrite {
			return []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}},
				{Chunk: 1, Slice: Slice{ID: id, Size: 10, Len: 10}, Data: data}}
		}, 0},
		{"a size beyond the bytes", f.Ino, func(id uint64) []SliceWrite {
			return []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}, Data: data}}
		}, 11},
		{"a file longer than the bytes", big.Ino, func(id uint64) []SliceWrite {
			return []SliceWrite{{Slice: Slice{ID: id, Size: 10, Len: 10}, Data: data}}
		}, 0},
		{"too large", f.Ino, func(id uint64) []SliceWrite {
			d := make([]byte, MaxInlineSlice+1)
			return []SliceWrite{{Slice: Slice{ID: id, Size: uint32(len(d)), Len: uint32(len(d))}, Data: d}}
		}, 0},
	} {
		id := allocOne(t, e)
		if _, err := e.Commit(credRoot, tc.ino, tc.writes(id), tc.size, 0, 4); err != syscall.EINVAL {
			t.Errorf("%s: %v, want EINVAL", tc.name, err)
		}
	}
	if b, n := e.InlineBytes(); b != 0 || n != 0 {
		t.Fatalf("refused commits left %d bytes in %d inline slices", b, n)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestInlineLimit(t *testing.T) {
	e := New(1, 1)
	for i := range MaxInlineSlices {
		commitInline(t, e, fmt.Sprintf("f%d", i), []byte{byte(i)}, 2)
	}
	f, _ := e.Mknod(credRoot, e.Root(), "over", S_IFREG|0o644, 0, 3)
	id := allocOne(t, e)
	w := []SliceWrite{{Slice: Slice{ID: id, Size: 1, Len: 1}, Data: []byte{1}}}
	if _, err := e.Commit(credRoot, f.Ino, w, 0, 0, 3); err != syscall.ENOBUFS {
		t.Fatalf("commit beyond the inline limit: %v, want ENOBUFS", err)
	}
	// The writer stores the objects itself and commits without the bytes.
	w[0].Data = nil
	if _, err := e.Commit(credRoot, f.Ino, w, 0, 0, 3); err != nil {
		t.Fatal(err)
	}
	list, eof := e.ListInline(0, 100)
	if len(list) != 100 || eof {
		t.Fatalf("a page of 100: %d, eof %v", len(list), eof)
	}
	e.InlineStored([]uint64{list[0].ID})
	g, _ := e.Mknod(credRoot, e.Root(), "room", S_IFREG|0o644, 0, 4)
	id = allocOne(t, e)
	w = []SliceWrite{{Slice: Slice{ID: id, Size: 1, Len: 1}, Data: []byte{1}}}
	if _, err := e.Commit(credRoot, g.Ino, w, 0, 0, 4); err != nil {
		t.Fatalf("commit once there is room again: %v", err)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestInlineFreedWithTheFile(t *testing.T) {
	e := New(1, 1)
	_, id := commitInline(t, e, "gone", []byte("bytes"), 2)
	ino, old := commitInline(t, e, "rewritten", []byte("first"), 2)
	// Truncated to nothing, then written again inline (open with
	// O_TRUNC, write, close): the first slice goes.
	if _, err := e.SetAttr(credRoot, ino, SetAttr{Valid: SetSize}, 3); err != nil {
		t.Fatal(err)
	}
	nid := allocOne(t, e)
	if _, err := e.Commit(credRoot, ino, []SliceWrite{{Slice: Slice{ID: nid, Size: 3, Len: 3}, Data: []byte("new")}}, 0, 0, 3); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Inline(old); ok {
		t.Fatal("the covered slice's bytes are kept")
	}
	if err := e.Unlink(credRoot, e.Root(), "gone", 4); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Inline(id); ok {
		t.Fatal("a removed file's inline bytes are kept")
	}
	if e.GarbageLen() != 2 {
		t.Fatalf("garbage %d, want the two freed ids (the collector deletes whatever objects were stored)", e.GarbageLen())
	}
	if b, n := e.InlineBytes(); b != 3 || n != 1 {
		t.Fatalf("InlineBytes %d %d, want the rewritten file's 3", b, n)
	}
	// Truncating to zero frees the last one.
	if _, err := e.SetAttr(credRoot, ino, SetAttr{Valid: SetSize}, 5); err != nil {
		t.Fatal(err)
	}
	if b, n := e.InlineBytes(); b != 0 || n != 0 {
		t.Fatalf("InlineBytes after truncate %d %d", b, n)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestInlineSharedByAClone(t *testing.T) {
	e := New(1, 1)
	ino, id := commitInline(t, e, "f", []byte("shared"), 2)
	c, err := e.Clone(credRoot, ino, e.Root(), "copy", 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Unlink(credRoot, e.Root(), "f", 4); err != nil {
		t.Fatal(err)
	}
	if got := inlineOfFile(t, e, c.Ino); string(got) != "shared" {
		t.Fatalf("the clone's bytes after the original went: %q", got)
	}
	g, _ := e.Mknod(credRoot, e.Root(), "g", S_IFREG|0o644, 0, 5)
	if _, err := e.Concat(credRoot, g.Ino, []Ino{c.Ino}, 5); err != nil {
		t.Fatalf("concat of an inline source: %v", err)
	}
	_, views, _ := e.ReadChunks(g.Ino, 0, 1)
	if len(views[0].Slices) != 1 || views[0].Slices[0].ID != id {
		t.Fatalf("the concatenation's views: %+v", views[0].Slices)
	}
	e = reloadEngine(t, e)
	if err := e.Unlink(credRoot, e.Root(), "copy", 6); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Inline(id); !ok {
		t.Fatal("bytes dropped while the concatenation still uses them")
	}
	if err := e.Unlink(credRoot, e.Root(), "g", 6); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Inline(id); ok {
		t.Fatal("bytes kept after the last file using them went")
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestInlineFreezeKeepsItsBytes: a checkpoint written from a freeze holds
// the inline bytes as they were at the freeze, whatever the engine does
// meanwhile.
func TestInlineFreezeKeepsItsBytes(t *testing.T) {
	e := New(1, 1)
	_, a := commitInline(t, e, "a", []byte("aaaa"), 2)
	var want bytes.Buffer
	if err := e.WriteCheckpoint(&want); err != nil {
		t.Fatal(err)
	}
	fr := e.Freeze()
	e.InlineStored([]uint64{a})
	commitInline(t, e, "b", []byte("bbbb"), 3)
	var got bytes.Buffer
	if err := fr.WriteCheckpoint(&got); err != nil {
		t.Fatal(err)
	}
	fr.Release()
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatal("the frozen checkpoint differs from the one written at the freeze")
	}
	if _, ok := e.Inline(a); ok {
		t.Fatal("the engine kept bytes it was told are stored")
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestInlineJSONRoundTrip(t *testing.T) {
	e := New(1, 1)
	commitInline(t, e, "text", []byte("plain text"), 2)
	commitInline(t, e, "binary", []byte{0, 0xff, 0xfe, 1}, 2)
	var ck, js, back bytes.Buffer
	if err := e.WriteCheckpoint(&ck); err != nil {
		t.Fatal(err)
	}
	if err := CheckpointToJSON(bytes.NewReader(ck.Bytes()), &js, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js.Bytes(), []byte(`"t":"inline_slice"`)) {
		t.Fatalf("no inline record in the JSON dump:\n%s", js.String())
	}
	if err := JSONToCheckpoint(bytes.NewReader(js.Bytes()), &back, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), ck.Bytes()) {
		t.Fatal("checkpoint -> JSON -> checkpoint changed the bytes")
	}
}

// TestInlineMovesAcrossPartitions: a file whose bytes are still inline
// renamed to another partition takes them along; the source keeps them
// until it forgets the intent (a retried step 4 may need them), and
// every step passes the invariant check after a checkpoint.
func TestInlineMovesAcrossPartitions(t *testing.T) {
	src, dst := New(1, 1), New(2, 1)
	_, id := commitInline(t, src, "f", []byte("travels"), 2)
	xid := XID{7}
	if _, err := src.XPrepareSource(credRoot, xid, src.Root(), "f", 0, 2, nil, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.XPrepareTarget(credRoot, xid, dst.Root(), "g", 0, 1, false, XSize{}, nil, 3); err != nil {
		t.Fatal(err)
	}
	img, err := src.XCommitSource(xid, nil, nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	src = reloadEngine(t, src)
	sent := *img
	sent.Inline = src.ImageInline(img)
	if len(sent.Inline) != 1 || string(sent.Inline[0].Data) != "travels" {
		t.Fatalf("the image's inline bytes: %+v", sent.Inline)
	}
	if err := dst.XCommitTarget(xid, &sent, 5); err != nil {
		t.Fatal(err)
	}
	dst = reloadEngine(t, dst)
	g, err := dst.Lookup(credRoot, dst.Root(), "g")
	if err != nil {
		t.Fatal(err)
	}
	if got := inlineOfFile(t, dst, g.Ino); string(got) != "travels" {
		t.Fatalf("arrived bytes %q", got)
	}
	if err := src.XForget(xid, 6); err != nil {
		t.Fatal(err)
	}
	if _, ok := src.Inline(id); ok {
		t.Fatal("the source kept the bytes after forgetting the intent")
	}
	reloadEngine(t, src)
	// A bad image is refused: bytes for a slice it does not have.
	bad := sent
	bad.Inline = []InlineSlice{{ID: id + 1, Data: []byte("x")}}
	if err := checkImage(&bad); err == nil {
		t.Fatal("an image with bytes of a slice it does not hold was accepted")
	}
}

// TestInlineComesBackBeforeTheIntentIsForgotten: a file moves S -> T,
// then back T -> S before S has forgotten the first intent (step 5 late:
// the router died); the late forget must not take the bytes the file came
// back with.
func TestInlineComesBackBeforeTheIntentIsForgotten(t *testing.T) {
	s, d := New(1, 1), New(2, 1)
	_, id := commitInline(t, s, "f", []byte("round trip"), 2)
	move := func(from, to *Engine, xid XID, name, newName string, now int64) {
		t.Helper()
		if _, err := from.XPrepareSource(credRoot, xid, from.Root(), name, 0, to.part, nil, now); err != nil {
			t.Fatal(err)
		}
		if _, err := to.XPrepareTarget(credRoot, xid, to.Root(), newName, 0, from.part, false, XSize{}, nil, now); err != nil {
			t.Fatal(err)
		}
		img, err := from.XCommitSource(xid, nil, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		sent := *img
		sent.Inline = from.ImageInline(img)
		if err := to.XCommitTarget(xid, &sent, now); err != nil {
			t.Fatal(err)
		}
	}
	move(s, d, XID{1}, "f", "g", 3) // step 5 at s not yet
	move(d, s, XID{2}, "g", "h", 4)
	if err := d.XForget(XID{2}, 5); err != nil {
		t.Fatal(err)
	}
	if err := s.XForget(XID{1}, 6); err != nil { // the late one
		t.Fatal(err)
	}
	h, err := s.Lookup(credRoot, s.Root(), "h")
	if err != nil {
		t.Fatal(err)
	}
	if got := inlineOfFile(t, s, h.Ino); string(got) != "round trip" {
		t.Fatalf("the bytes after the late forget: %q", got)
	}
	for _, e := range []*Engine{s, d} {
		if err := e.Check(); err != nil {
			t.Fatal(err)
		}
		reloadEngine(t, e)
	}
	if _, ok := d.Inline(id); ok {
		t.Fatal("the partition the file left keeps its bytes")
	}
}

// TestInlineConcatBound: CONCAT refuses to give a file more than
// MaxFileInlineBytes of inline slices, so that what one file's views or
// image carry stays within a frame.
func TestInlineConcatBound(t *testing.T) {
	e := New(1, 1)
	var srcs []Ino
	for i := range MaxFileInlineBytes/MaxInlineSlice + 1 {
		ino, _ := commitInline(t, e, fmt.Sprintf("s%d", i), make([]byte, MaxInlineSlice), 2)
		srcs = append(srcs, ino)
	}
	g, _ := e.Mknod(credRoot, e.Root(), "g", S_IFREG|0o644, 0, 3)
	if _, err := e.Concat(credRoot, g.Ino, srcs, 3); err != syscall.EINVAL {
		t.Fatalf("concat of %d KiB of inline slices: %v, want EINVAL", len(srcs)*MaxInlineSlice>>10, err)
	}
	if _, err := e.Concat(credRoot, g.Ino, srcs[1:], 3); err != nil {
		t.Fatalf("concat of %d KiB: %v", (len(srcs)-1)*MaxInlineSlice>>10, err)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestCloneRefusesAPinnedNode: a node pinned as the target of an exchange
// across partitions is not copied (the copy would share slices with the
// partition it is about to leave for).
func TestCloneRefusesAPinnedNode(t *testing.T) {
	e := New(2, 1)
	dir, _ := e.Mkdir(credRoot, e.Root(), "d", 0o755, 2)
	f, _ := e.Mknod(credRoot, dir.Ino, "f", S_IFREG|0o644, 0, 2)
	id := allocOne(t, e)
	if _, err := e.Commit(credRoot, f.Ino, []SliceWrite{{Slice: Slice{ID: id, Size: 5, Len: 5}}}, 5, 0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := e.XPrepareTarget(credRoot, XID{3}, dir.Ino, "f", RenameExchange, 1, false, XSize{}, nil, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Clone(credRoot, dir.Ino, e.Root(), "copy", 4); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("clone of a directory holding a pinned node: %v, want EBUSY", err)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}
