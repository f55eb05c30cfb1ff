package mount

import (
	"errors"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestNormalizeErrno(t *testing.T) {
	for _, c := range []struct {
		in   string
		want error
	}{
		{"", syscall.ENOENT},
		{"a", syscall.EINVAL},
		{"/a\x00", syscall.EINVAL},
		{"/" + strings.Repeat("n", 256), syscall.ENAMETOOLONG},
		{strings.Repeat("/", 4096), syscall.ENAMETOOLONG},
		// The length check comes first, as in the engine.
		{"a" + strings.Repeat("/", 4095), syscall.ENAMETOOLONG},
		// NUL is checked before the component lengths.
		{"/" + strings.Repeat("n", 256) + "/\x00", syscall.EINVAL},
	} {
		_, err := Normalize(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("Normalize(%s) = %v, want %v", quoteShort(c.in), err, c.want)
		}
	}
}

func TestNormalizeMatchesClean(t *testing.T) {
	parts := []string{"", ".", "..", "a", "bc", "...", ".x"}
	// Every absolute path of one to five components from parts.
	var walk func(p string, depth int)
	walk = func(p string, depth int) {
		if p != "" {
			got, err := Normalize(p)
			if err != nil {
				t.Fatalf("Normalize(%q): %v", p, err)
			}
			if want := path.Clean(p); got != want {
				t.Fatalf("Normalize(%q) = %q, path.Clean gives %q", p, got, want)
			}
		}
		if depth == 5 {
			return
		}
		for _, c := range parts {
			walk(p+"/"+c, depth+1)
		}
	}
	walk("", 0)
}

func TestNormalizeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	clean := "/user/alice/project/src/main.go"
	n := testing.AllocsPerRun(100, func() {
		if out, err := Normalize(clean); err != nil || out != clean {
			t.Fatal(out, err)
		}
	})
	if n != 0 {
		t.Errorf("Normalize of a canonical path: %v allocations, want 0", n)
	}
	n = testing.AllocsPerRun(100, func() { Normalize("/user//alice/./project/") })
	if n != 1 {
		t.Errorf("Normalize of a path to clean: %v allocations, want 1", n)
	}
}

func TestLookupAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s := mustCompile(Table{Version: 1, Entries: []Entry{
		{Prefix: "/", Target: "/"},
		{Prefix: "/deep", VPart: 3, Target: "/x/y"},
		{Prefix: "/root", VPart: 2, Target: "/"},
		{Prefix: "/same", VPart: 1, Target: "/same"},
	}})
	for _, c := range []struct {
		path, inner string
		allocs      float64
	}{
		{"/same/a/b", "/same/a/b", 0},
		{"/root/a/b", "/a/b", 0},
		{"/root", "/", 0},
		{"/other/a", "/other/a", 0},
		{"/deep", "/x/y", 0},
		{"/deep/a/b", "/x/y/a/b", 1},
	} {
		n := testing.AllocsPerRun(100, func() {
			if _, inner, ok := s.Lookup(c.path); !ok || inner != c.inner {
				t.Fatalf("Lookup(%q) = %q %v, want %q", c.path, inner, ok, c.inner)
			}
		})
		if n != c.allocs {
			t.Errorf("Lookup(%q): %v allocations, want %v", c.path, n, c.allocs)
		}
		buf := make([]byte, 0, 64)
		n = testing.AllocsPerRun(100, func() {
			if _, out, ok := s.LookupAppend(buf[:0], c.path); !ok || string(out) != c.inner {
				t.Fatalf("LookupAppend(%q) = %q %v, want %q", c.path, out, ok, c.inner)
			}
		})
		if n != 0 {
			t.Errorf("LookupAppend(%q): %v allocations, want 0", c.path, n)
		}
	}
}

func TestNilSnapshot(t *testing.T) {
	var s *Snapshot
	if _, _, ok := s.Lookup("/a"); ok {
		t.Error("Lookup on nil found an entry")
	}
	if _, _, ok := s.LookupAppend(nil, "/a"); ok {
		t.Error("LookupAppend on nil found an entry")
	}
	if s.Children("/") != nil {
		t.Error("Children on nil is not nil")
	}
	if _, _, same := s.SameEntry("/a", "/a"); same {
		t.Error("SameEntry on nil says same")
	}
	var c Current
	if c.Load() != nil {
		t.Error("zero Current holds a snapshot")
	}
	if c.Store(nil) {
		t.Error("Store(nil) succeeded")
	}
}

func TestCompileCopiesTable(t *testing.T) {
	tab := Table{Version: 7, Entries: []Entry{{Prefix: "/", Target: "/"}, {Prefix: "/a", VPart: 1, Target: "/"}}}
	s := mustCompile(tab)
	tab.Entries[1].VPart = 9
	if e, _, _ := s.Lookup("/a/x"); e.VPart != 1 {
		t.Errorf("the snapshot changed with the table: vpart %d", e.VPart)
	}
	got := s.Table()
	if got.Version != 7 || len(got.Entries) != 2 || got.Entries[1].VPart != 1 {
		t.Errorf("Table() = %+v", got)
	}
	var prefixes []string
	s.Entries(func(e *Entry) bool { prefixes = append(prefixes, e.Prefix); return true })
	if !slices.Equal(prefixes, []string{"/", "/a"}) {
		t.Errorf("Entries visited %q", prefixes)
	}
	prefixes = nil
	s.Entries(func(e *Entry) bool { prefixes = append(prefixes, e.Prefix); return false })
	if len(prefixes) != 1 {
		t.Errorf("Entries went on after false: %q", prefixes)
	}
}

func TestCurrentStoreOnlyNewer(t *testing.T) {
	mk := func(v uint64) *Snapshot {
		return mustCompile(Table{Version: v, Entries: []Entry{{Prefix: "/", Target: "/"}}})
	}
	var c Current
	s5, s3, s6 := mk(5), mk(3), mk(6)
	if !c.Store(s5) || c.Load() != s5 {
		t.Fatal("first Store failed")
	}
	if c.Store(s3) || c.Load() != s5 {
		t.Error("an older version replaced a newer one")
	}
	if c.Store(mk(5)) || c.Load() != s5 {
		t.Error("the same version replaced the live one")
	}
	if !c.Store(s6) || c.Load() != s6 {
		t.Error("a newer version was refused")
	}
}

func TestTableSetKeepsOrder(t *testing.T) {
	tab := Table{}
	var err error
	for _, p := range []string{"/", "/b", "/a/b-x", "/a", "/a/b", "/b", "/a/b/c"} {
		if tab, err = tab.Set(Entry{Prefix: p, Target: "/"}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, e := range tab.Entries {
		got = append(got, e.Prefix)
	}
	want := []string{"/", "/a", "/a/b", "/a/b-x", "/a/b/c", "/b"}
	if !slices.Equal(got, want) || tab.Version != 7 {
		t.Fatalf("after Set: v%d %q, want v7 %q", tab.Version, got, want)
	}
	if err := tab.Validate(); err != nil {
		t.Fatal(err)
	}
	old := tab
	tab2, err := tab.Remove("/a/b")
	if err != nil {
		t.Fatal(err)
	}
	if len(old.Entries) != 6 || old.Entries[2].Prefix != "/a/b" {
		t.Error("Remove changed the table it was called on")
	}
	if len(tab2.Entries) != 5 || tab2.Version != 8 {
		t.Errorf("after Remove: %+v", tab2)
	}
}

func TestRouting(t *testing.T) {
	r := Routing{Version: 3, Groups: map[uint16][]string{
		0:    {"m1:7000", "m2:7000", "m3:7000"},
		7:    {"m4:7000"},
		4095: {"m5:7000"},
	}}
	rs, err := CompileRouting(r)
	if err != nil {
		t.Fatal(err)
	}
	r.Groups[0][0] = "changed"
	if g := rs.Group(0); !slices.Equal(g, []string{"m1:7000", "m2:7000", "m3:7000"}) {
		t.Errorf("Group(0) = %q", g)
	}
	if rs.Group(1) != nil || rs.Group(4096) != nil || rs.Group(65535) != nil {
		t.Error("a group for an unrouted or out-of-range vpart")
	}
	if rs.Version() != 3 {
		t.Errorf("Version = %d", rs.Version())
	}
	back := rs.Routing()
	if back.Version != 3 || len(back.Groups) != 3 || back.Groups[4095][0] != "m5:7000" {
		t.Errorf("Routing() = %+v", back)
	}

	for _, bad := range []map[uint16][]string{
		{4096: {"a"}},
		{1: {}},
		{1: {"a", ""}},
		{1: {"a", "b", "a"}},
	} {
		_, err := CompileRouting(Routing{Groups: bad})
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("CompileRouting(%v) = %v, want EINVAL", bad, err)
		}
	}

	s := mustCompile(Table{Entries: []Entry{
		{Prefix: "/", VPart: 0, Target: "/"},
		{Prefix: "/a", VPart: 9, Target: "/"},
		{Prefix: "/b", VPart: 7, Target: "/"},
		{Prefix: "/c", VPart: 2, Target: "/"},
		{Prefix: "/d", VPart: 9, Target: "/x"},
	}})
	if got := Unrouted(s, rs); !slices.Equal(got, []uint16{2, 9}) {
		t.Errorf("Unrouted = %v, want [2 9]", got)
	}

	var c CurrentRouting
	if c.Load() != nil {
		t.Error("zero CurrentRouting holds a snapshot")
	}
	older, _ := CompileRouting(Routing{Version: 2})
	if !c.Store(rs) || c.Store(older) || c.Load() != rs {
		t.Error("CurrentRouting.Store did not keep the newest version")
	}
}
