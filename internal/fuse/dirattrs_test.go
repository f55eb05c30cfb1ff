package fuse

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/canopyfs/canopy/client"
)

// TestDirAttrsKeepsOnlyUnrivalled checks when a create's directory
// attributes may answer the next GETATTR: alone, yes, once; not after
// the attribute timeout, not when another create or a directory change
// overlapped it or came after, not when the directory's own attributes
// changed meanwhile.
func TestDirAttrsKeepsOnlyUnrivalled(t *testing.T) {
	const dir = client.Ino(7)
	a := &client.Attr{Ino: dir, Mode: syscall.S_IFDIR | 0o755, Nlink: 2}
	d := &dirAttrs{ttl: time.Hour}
	take := func() bool { _, ok := d.take(dir); return ok }

	d.created(d.beginCreate(), dir, a)
	if !take() {
		t.Fatal("a lone create's attributes were not kept")
	}
	if take() {
		t.Fatal("kept attributes answered twice")
	}

	// Another create overlapping: neither keeps anything.
	e1 := d.beginCreate()
	e2 := d.beginCreate()
	d.created(e2, dir, a)
	d.created(e1, dir, a)
	if take() {
		t.Fatal("overlapping creates kept attributes")
	}

	// A directory change during the create, or after it.
	e := d.beginCreate()
	d.dirChange()
	d.created(e, dir, a)
	if take() {
		t.Fatal("kept across a directory change that began during the create")
	}
	d.created(d.beginCreate(), dir, a)
	d.dirChange()
	if take() {
		t.Fatal("kept across a later directory change")
	}

	// A change of the directory's own attributes overlapping the
	// create, ended before or after it; one of another node does not
	// matter.
	e = d.beginCreate()
	d.beginNode(dir)
	d.endNode(dir)
	d.created(e, dir, a)
	if take() {
		t.Fatal("kept across a chmod of the directory that ran during the create")
	}
	d.beginNode(dir)
	d.created(d.beginCreate(), dir, a)
	d.endNode(dir)
	if take() {
		t.Fatal("kept across a chmod of the directory still in flight")
	}
	d.created(d.beginCreate(), dir, a)
	d.beginNode(dir + 1)
	d.endNode(dir + 1)
	if !take() {
		t.Fatal("a change of another node dropped the directory's attributes")
	}

	// A failed create keeps nothing and forgets what was kept.
	d.created(d.beginCreate(), dir, a)
	d.created(d.beginCreate(), dir, nil)
	if take() {
		t.Fatal("kept after a failed create")
	}

	// The attribute timeout bounds them; a zero timeout keeps nothing.
	d.ttl = time.Nanosecond
	d.created(d.beginCreate(), dir, a)
	time.Sleep(time.Millisecond)
	if take() {
		t.Fatal("answered after the attribute timeout")
	}
	d.ttl = 0
	d.created(d.beginCreate(), dir, a)
	if take() {
		t.Fatal("kept with a zero attribute timeout")
	}
}

// TestDirAttrsAfterCreateOnMount: after creates, stat of the directory
// through the mount (answered from the create's reply where it may be)
// shows what the service has, also after a chmod, a mkdir and an unlink
// in between.
func TestDirAttrsAfterCreateOnMount(t *testing.T) {
	f, _, _ := countingMount(t, DefaultOptions())
	must(t, os.Mkdir(f.path("d"), 0o755))
	check := func(what string) {
		t.Helper()
		st, err := os.Stat(f.path("d"))
		must(t, err)
		fi, err := f.c.Stat(t.Context(), "/d")
		must(t, err)
		sys := st.Sys().(*syscall.Stat_t)
		want := fi.Attr()
		if st.ModTime().UnixNano() != want.Mtime.UnixNano() || sys.Ctim.Nano() != want.Ctime.UnixNano() ||
			uint32(sys.Mode) != want.Mode || uint32(sys.Nlink) != want.Nlink {
			t.Fatalf("%s: the mount shows mtime %v ctime %d mode %o nlink %d, the service %v %d %o %d", what,
				st.ModTime(), sys.Ctim.Nano(), sys.Mode, sys.Nlink, want.Mtime, want.Ctime.UnixNano(), want.Mode, want.Nlink)
		}
	}
	create := func(name string) {
		t.Helper()
		w, err := os.OpenFile(f.path("d", name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		must(t, err)
		must(t, w.Close())
	}
	create("a")
	check("after a create")
	create("b")
	must(t, os.Chmod(f.path("d"), 0o700))
	check("after a create and a chmod of the directory")
	create("c")
	must(t, os.Mkdir(f.path("d", "sub"), 0o755))
	check("after a create and a mkdir")
	create("e")
	must(t, os.Remove(f.path("d", "a")))
	check("after a create and an unlink")
	for i := range 20 {
		create("n" + string(rune('a'+i)))
		check("after creates in turn")
	}
	if n := testutil.ToFloat64(f.m.FS.m.dirAttrHits); n == 0 {
		t.Error("no GETATTR was answered from a create's reply")
	}
}
